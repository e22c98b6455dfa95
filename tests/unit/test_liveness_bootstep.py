"""The liveness bootstep without a worker: who touches the file in each state of the consumer."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from graphrunner.cluster.worker import liveness
from graphrunner.cluster.worker.liveness import HOUSEKEEPING_STALL, Liveness, age


class Timer:
    """The consumer's timer, as far as the bootstep uses it: entries it may cancel."""

    def __init__(self) -> None:
        self.entries: list[Any] = []

    def call_repeatedly(self, every: float, fun: Any, args: Any = (), priority: int = 0) -> Any:
        entry = Entry(fun)
        self.entries.append(entry)
        return entry


class Entry:
    def __init__(self, fun: Any) -> None:
        self.fun, self.cancelled = fun, False

    def cancel(self) -> None:
        self.cancelled = True


class Consumer:
    def __init__(self) -> None:
        self.timer = Timer()


def aged(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_the_loop_touches_while_connected_and_a_thread_while_reconnecting(tmp_path: Path) -> None:
    path = tmp_path / "alive"
    step = type("Step", (Liveness,), {"path": path})(None)
    assert age(path) is not None  # connecting at start: the bridge touched it
    consumer = Consumer()
    step.start(consumer)
    (entry,) = consumer.timer.entries
    assert step._bridge is None and not entry.cancelled
    aged(path, 100)
    entry.fun()
    assert (age(path) or 0) < 100
    step.stop(consumer)  # the broker went away: Celery reconnects
    assert entry.cancelled and step._bridge is not None
    step.shutdown(consumer)
    assert step._bridge is None and age(path) is None


def test_a_stuck_housekeeping_thread_stops_the_touches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "alive"
    step = type("Step", (Liveness,), {"path": path})(None)
    step.start(Consumer())
    aged(path, 100)
    monkeypatch.setattr(liveness.HOUSEKEEPING, "_at", time.monotonic() - HOUSEKEEPING_STALL - 1)
    step.beat()
    assert (age(path) or 0) >= 100
    liveness.HOUSEKEEPING.mark()
    step.beat()
    assert (age(path) or 100) < 100
    step.shutdown(None)
