"""SIGINT, SIGTERM and SIGHUP as exceptions, so that a command unwinds and stops what it started.

Python turns SIGINT into `KeyboardInterrupt`, but SIGTERM and SIGHUP end the process on the
spot: no `finally`, no `with` exit, so an embedded Redis, its directory and the worker
were left behind. While `signals_raised()` is active, SIGTERM and SIGHUP raise `Terminated`
(a `KeyboardInterrupt`) in the main thread instead; the context managers that started
things stop them on the way out, and the command exits 128 + the signal number.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from graphrunner.cli.common import fail

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
NAMES = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated", signal.SIGHUP: "hung up"}


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived; handled wherever Ctrl-C is."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def signal_number(exc: KeyboardInterrupt) -> int:
    """The signal behind the interruption: SIGINT for a plain `KeyboardInterrupt`."""
    return exc.signum if isinstance(exc, Terminated) else int(signal.SIGINT)


def exit_code(exc: KeyboardInterrupt) -> int:
    """The shell's convention: 128 + the signal number (130 for SIGINT, 143 for SIGTERM)."""
    return 128 + signal_number(exc)


def how_stopped(exc: KeyboardInterrupt) -> str:
    """`interrupted`, `terminated` or `hung up`."""
    return NAMES.get(signal.Signals(signal_number(exc)), "terminated")


def _raise(signum: int, frame: FrameType | None) -> None:
    """Raise for the first signal; ignore the ones after it, so that the clean-up is not cut short."""
    for sig in HANDLED:
        if signal.getsignal(sig) is _raise:
            signal.signal(sig, signal.SIG_IGN)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


@contextmanager
def signals_raised() -> Iterator[None]:
    """While the block runs (in the main thread), SIGINT, SIGTERM and SIGHUP raise; then restore.

    A signal the process was started with ignored (`nohup`, a background job) stays ignored;
    outside the main thread (where Python cannot set handlers) nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in HANDLED}
    for sig, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(sig, _raise)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            if handler is not None:  # None: set outside Python, cannot be restored from here
                signal.signal(sig, handler)


@contextmanager
def exit_on_signals() -> Iterator[None]:
    """`signals_raised`, and a signal that reaches the end of the block exits 128 + N, no traceback."""
    with signals_raised():
        try:
            yield
        except KeyboardInterrupt as exc:
            fail(how_stopped(exc), exit_code(exc))
