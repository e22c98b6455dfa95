"""SIGINT, SIGTERM and SIGHUP as exceptions, so that a command unwinds and stops what it started.

Python turns SIGINT into `KeyboardInterrupt`, but SIGTERM and SIGHUP end the process on the
spot: no `finally`, no `with` exit, so an embedded Redis, its directory and the worker
were left behind. While `signals_raised()` is active, SIGTERM and SIGHUP raise `Terminated`
(a `KeyboardInterrupt`) in the main thread instead; the context managers that started
things stop them on the way out, and the command exits 128 + the signal number.

Inside an event loop an exception raised by a signal handler can land in the middle of a
coroutine and skip the clean-up that cancellation runs (asyncio kills a subprocess it was
starting, a shell tool kills its process group), so `cancelled_on_signals` cancels the
awaited work instead and raises once it has unwound.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TypeVar

from graphrunner.cli.common import fail

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
NAMES = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated", signal.SIGHUP: "hung up"}
T = TypeVar("T")


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


def interruption(signum: int) -> KeyboardInterrupt:
    """The exception for `signum`: `KeyboardInterrupt` for SIGINT, else `Terminated`."""
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


def _raise(signum: int, frame: FrameType | None) -> None:
    """Raise for the first signal; ignore the ones after it, so that the clean-up is not cut short."""
    for sig in HANDLED:
        if signal.getsignal(sig) is _raise:
            signal.signal(sig, signal.SIG_IGN)
    raise interruption(signum)


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


async def cancelled_on_signals(awaitable: Awaitable[T]) -> T:
    """Await `awaitable`; SIGINT, SIGTERM or SIGHUP cancel it, and its interruption is raised after.

    Signals after the first are ignored, as by `signals_raised`; ignored signals stay ignored.
    Outside the main thread (no signal handlers there) it only awaits.
    """
    import asyncio  # already imported: this runs in an event loop

    task = asyncio.current_task()
    if task is None or threading.current_thread() is not threading.main_thread():
        return await awaitable
    loop = asyncio.get_running_loop()
    received: list[int] = []

    def cancel(signum: int) -> None:
        if not received:
            received.append(signum)
            task.cancel()

    previous = {sig: signal.getsignal(sig) for sig in HANDLED}
    handled = [sig for sig, handler in previous.items() if handler is not signal.SIG_IGN]
    for sig in handled:
        loop.add_signal_handler(sig, cancel, sig)
    try:
        outcome = await awaitable
    except BaseException:  # CancelledError, or whatever the work made of it
        if not received:
            raise
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)  # which resets it to the default: put back the one before
            if previous[sig] is not None:
                signal.signal(sig, previous[sig])
    if received:
        raise interruption(received[0])
    return outcome
