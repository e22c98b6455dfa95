"""Heartbeats of the steps and items a worker process is running.

While a task runs, its run id is registered here; one daemon thread per process writes a
heartbeat on every registered run every `interval` seconds (one pipelined round trip for
all of them), which also pushes the run's progress deadline on: the sweeper looks only at
runs whose deadline has passed (no commit, heartbeat or item for `GRAPHRUNNER_STALL_AFTER`).
Registering costs no round trip, so a step that ends within `interval` never beats.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from graphrunner.store import Store

log = logging.getLogger("graphrunner.worker")


class Heartbeats:
    """The runs in flight in this process, beaten for by one lazily started daemon thread."""

    def __init__(self, store: Store, interval: float, stall_after: float) -> None:
        self.store = store
        self.interval = max(0.5, interval)
        self.stall_after = stall_after
        self._running: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._pid: int | None = None  # the process the thread was started in (prefork forks)
        self._stop = threading.Event()

    @contextmanager
    def beating(self, run_id: str) -> Iterator[None]:
        """Heartbeat `run_id` while the block runs."""
        self._ensure_thread()
        with self._lock:
            self._running[run_id] += 1
        try:
            yield
        finally:
            with self._lock:
                self._running[run_id] -= 1
                if self._running[run_id] <= 0:
                    del self._running[run_id]

    def in_flight(self) -> list[str]:
        """The run ids registered now."""
        with self._lock:
            return list(self._running)

    def stop(self) -> None:
        """Stop the thread (when the worker stops)."""
        self._stop.set()

    def _ensure_thread(self) -> None:
        if self._pid == os.getpid():
            return
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
            self._stop = threading.Event()
            threading.Thread(target=self._loop, name="graphrunner-heartbeat", daemon=True).start()

    def _loop(self) -> None:
        stop = self._stop
        while not stop.wait(self.interval):
            runs = self.in_flight()
            if not runs:
                continue
            try:
                self.store.beat(runs, progress=time.time() + self.stall_after)
            except Exception as exc:  # Redis away: the next beat tries again; never kill the thread
                log.warning("heartbeat failed (%s); will try again", exc)
