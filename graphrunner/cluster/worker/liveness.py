"""A worker's liveness file: proof, without the network, that the worker is not wedged.

`graphrunner ping --local` asks the worker over the broker, so a long broker outage would fail
every worker's liveness probe and restart them all, which helps nothing. Instead the worker
touches a file (GRAPHRUNNER_LIVENESS_FILE) and `graphrunner alive` reads its age:

- while the consumer is connected, a timer in the consumer's event loop touches it every
  `EVERY` seconds, provided the housekeeping thread (timers, sweeps) finished a round within
  `HOUSEKEEPING_STALL` seconds: a loop blocked in a call (it is also the loop that vouches for
  the messages the worker holds) or a hung housekeeping thread stops the touches;
- while the consumer is (re)connecting to its broker, which Celery retries with backoff, a
  small thread touches it: a worker waiting for its broker is alive, and a restart would not
  bring the broker back;
- at a clean shutdown the file is removed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from celery import bootsteps

log = logging.getLogger("graphrunner.worker")
EVERY = 5.0  # seconds between two touches
HOUSEKEEPING_STALL = 300.0  # a housekeeping round longer than this is a hung thread: each Redis
# call in it gives up after the store's retry window (60 s on a worker)


class Stamp:
    """When something last happened in this process (monotonic); starts at its creation."""

    def __init__(self) -> None:
        self._at = time.monotonic()

    def mark(self) -> None:
        """It happened now."""
        self._at = time.monotonic()

    def age(self) -> float:
        """Seconds since it last happened."""
        return time.monotonic() - self._at


HOUSEKEEPING = Stamp()  # marked by `Housekeeper.tick` at the end of every round


def touch(path: Path) -> None:
    """Set the file's modification time to now (creating it). Never raises."""
    try:
        path.touch()
        os.utime(path)
    except OSError as exc:
        log.warning("could not touch the liveness file %s (%s)", path, exc)


def age(path: Path) -> float | None:
    """Seconds since the file was last touched; None when there is no such file."""
    try:
        return max(0.0, time.time() - path.stat().st_mtime)
    except FileNotFoundError:
        return None


class Liveness(bootsteps.StartStopStep):  # type: ignore[misc]
    """A consumer bootstep touching the liveness file (see the module doc)."""

    requires = ("celery.worker.consumer.tasks:Tasks",)
    path: Path  # set on the subclass a worker registers (`WorkerRuntime`)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.tref: Any = None
        self._bridge: threading.Event | None = None
        self._connecting()  # the first connection is made before this step starts

    def start(self, consumer: Any) -> None:
        """Connected: touch from the consumer's event loop."""
        self._end_bridge()
        self.beat()
        self.tref = consumer.timer.call_repeatedly(EVERY, self.beat, (), priority=10)

    def beat(self) -> None:
        """Touch the file, unless housekeeping is stuck. Never raises."""
        stalled = HOUSEKEEPING.age()
        if stalled > HOUSEKEEPING_STALL:
            log.error("housekeeping has not finished a round for %.0fs: not touching %s", stalled, self.path)
            return
        touch(self.path)

    def stop(self, consumer: Any) -> None:
        """Disconnected (Celery reconnects, or stops): touch from a thread meanwhile."""
        self._cancel_timer()
        self._connecting()

    def shutdown(self, consumer: Any) -> None:
        """Stopping for good: no more touches, and no file."""
        self._cancel_timer()
        self._end_bridge()
        with contextlib.suppress(OSError):
            self.path.unlink(missing_ok=True)

    terminate = stop  # a cold shutdown: the process ends next

    def _cancel_timer(self) -> None:
        if self.tref is not None:
            self.tref.cancel()
            self.tref = None

    def _connecting(self) -> None:
        if self._bridge is not None:
            return
        done = self._bridge = threading.Event()
        touch(self.path)

        def bridge() -> None:
            while not done.wait(EVERY):
                touch(self.path)

        threading.Thread(target=bridge, name="graphrunner-liveness", daemon=True).start()

    def _end_bridge(self) -> None:
        if self._bridge is not None:
            self._bridge.set()
            self._bridge = None
