"""Time one fan-out of N items: a bare Celery chord, or a graphrunner parallel foreach run.

Each run is checked (all N items joined; it fails loudly otherwise) and reports the pid of the process
that ran the join: the one the chord body recorded, or the one in the `worker` field of the run's last
transcript record (the foreach node's step).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from celery import chord

from benchmarks import baseline, baseline_chord, graphs, memory
from benchmarks.drivers import POLL_SECONDS, poll_client
from graphrunner.client import Client
from graphrunner.errors import WaitTimeout
from graphrunner.results import RunResult
from graphrunner.settings import Settings


@dataclass(frozen=True)
class FanOut:
    """One timed fan-out of `items` items: seconds to the join, to the submit's return, join pid."""

    items: int
    seconds: float
    submit_seconds: float
    join_pid: int | None

    @property
    def rate(self) -> float:
        """Items per second."""
        return self.items / self.seconds


class FanOutDriver(Protocol):
    """What the harness needs of either side."""

    def run(self, items: int, timeout: float) -> FanOut:
        """Fan out over `items` items, wait for the join, time it; raise unless all items joined."""
        ...

    def close(self) -> None:
        """Release the driver's connections."""
        ...


class ChordDriver:
    """The bare Celery side: `chord(part(i) for i in range(N))(body)` on the baseline app (its broker
    is `CELERY_BROKER_URL` when set: benchmarks/topology.py sets it for `--broker amqp`)."""

    def __init__(self, url: str, prefetch: int) -> None:
        self.app = baseline.create_app(url, prefetch=prefetch)
        baseline_chord.register(self.app, url)
        self.poll = poll_client(url)

    def run(self, items: int, timeout: float) -> FanOut:
        """Apply a chord of `items` parts; time from just before `apply_async` to the body's commit."""
        key = baseline_chord.done_key(uuid.uuid4().hex)
        part, body = self.app.tasks[baseline_chord.PART_NAME], self.app.tasks[baseline_chord.BODY_NAME]
        header = [part.s(i) for i in range(items)]
        started = time.time()
        result = chord(header, body.s(key)).apply_async()
        submitted = time.time()
        done = self.body_record(key, time.monotonic() + timeout)
        # Release the client's pending results (and their pub/sub subscriptions) while Redis is up;
        # this also deletes the stored part results. Outside the timed window.
        result.forget()
        if done["n"] != items:
            raise RuntimeError(f"chord body {key} joined {done['n']} results, expected {items}")
        return FanOut(items, float(done["t"]) - started, submitted - started, int(done["pid"]))

    def body_record(self, key: str, deadline: float) -> dict[str, Any]:
        """What the body recorded, once it has run."""
        while time.monotonic() < deadline:
            raw = self.poll.get(key)
            if raw:
                done: dict[str, Any] = json.loads(str(raw))
                return done
            time.sleep(POLL_SECONDS)
        raise TimeoutError(f"baseline chord {key} did not finish in time")

    def close(self) -> None:
        """Release the driver's connections."""
        self.app.close()
        self.poll.close()


class ForeachDriver:
    """The graphrunner side: one run of `bench/foreach-fanout` through the public `Client` (on the
    Redis of `url`, and on `broker_url` as the broker if given, e.g. RabbitMQ)."""

    def __init__(self, url: str, prefetch: int, broker_url: str | None = None) -> None:
        settings = Settings(redis_url=url, broker_url=broker_url, prefetch=prefetch, quiet=True)
        self.client = Client(settings=settings)
        self.graph = graphs.load_foreach(settings)

    def run(self, items: int, timeout: float) -> FanOut:
        """Submit a run over `items` items; time from submit to the run's last commit."""
        inputs = {"items": list(range(items))}
        started = time.time()
        handle = self.client.submit(self.graph, inputs)
        submitted = time.time()
        try:
            result = handle.wait(timeout)
        except WaitTimeout as exc:
            raise TimeoutError(f"graphrunner run {handle.id} did not finish in time") from exc
        ended = time.time()
        _check_run(result, items)
        pid = memory.pid_of(str(result.steps[-1].get("worker", "")))
        return FanOut(items, self._committed(handle.id, ended) - started, submitted - started, pid)

    def _committed(self, run_id: str, fallback: float) -> float:
        """The run's last commit time (its `updated_at`), or `fallback` if it is not listed."""
        for run in self.client.list_runs(graph_id=self.graph.id, limit=20):
            if run.run_id == run_id:
                return run.updated_at / 1000
        return fallback

    def close(self) -> None:
        """Release the driver's connections."""
        self.client.close()


def _check_run(result: RunResult, items: int) -> None:
    """Raise unless the run completed with one collected result per item."""
    collected = result.state.get("results")
    count = len(collected) if isinstance(collected, list) else None
    if result.status != "completed" or count != items or not result.steps:
        raise RuntimeError(
            f"run {result.run_id} ended {result.status} with {count} results, expected completed "
            f"with {items}; error: {result.error}"
        )
