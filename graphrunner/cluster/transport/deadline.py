"""Hard deadlines for broker calls that have no timeout of their own.

RabbitMQ blocks a publishing connection under a memory or disk alarm: the publish is written,
its confirm never comes, and when the confirm's timeout fires kombu closes the channel, which
waits for a reply that never comes either (celery/celery#9259). `Watchdog.watch` runs a block
with a deadline; past it, the watchdog's thread calls the block's `on_expiry` (for a broker
connection: `cut`, which shuts its socket, so every read or write blocked on it returns at
once with an error). One daemon thread per process, started on first use (again after a fork);
it looks at the deadlines every `TICK` seconds, so entering a block wakes no thread (a publish
costs a dict entry, not a context switch) and a deadline fires at most `TICK` late.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

log = logging.getLogger("graphrunner.worker")
TICK = 1.0  # seconds between two looks at the deadlines


class Watchdog:
    """Calls the `on_expiry` of every `watch` block still running past its deadline."""

    def __init__(self) -> None:
        self._pid = 0
        self._ids = itertools.count()
        self._cond = threading.Condition()
        self._due: dict[int, tuple[float, Callable[[], None]]] = {}

    @contextmanager
    def watch(self, seconds: float, on_expiry: Callable[[], None]) -> Iterator[None]:
        """Run the block; call `on_expiry` (from another thread) if it is still running `seconds` on."""
        self._ensure_thread()
        key = next(self._ids)
        with self._cond:
            self._due[key] = (time.monotonic() + seconds, on_expiry)
        try:
            yield
        finally:
            with self._cond:
                self._due.pop(key, None)

    def _ensure_thread(self) -> None:
        if self._pid == os.getpid():
            return
        self._pid = os.getpid()  # a forked child inherits no thread, and maybe a held lock
        self._cond = threading.Condition()
        self._due = {}
        threading.Thread(target=self._run, name="graphrunner-deadlines", daemon=True).start()

    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                now = time.monotonic()
                expired = [k for k, (at, _) in self._due.items() if at <= now]
                fire = [self._due.pop(k)[1] for k in expired]
                if not fire:
                    cond.wait(TICK)
                    continue
            for on_expiry in fire:
                try:
                    on_expiry()
                except Exception as exc:  # never let one callback stop the others
                    log.warning("a deadline's callback failed (%s)", exc)


WATCHDOG = Watchdog()


def cut(connection: Any) -> None:
    """Shut the socket of a kombu connection (py-amqp): reads and writes blocked on it end now."""
    transport = getattr(getattr(connection, "_connection", None), "transport", None)
    sock = getattr(transport, "sock", None)
    if sock is not None:
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
