"""Submit N chains (baseline) or runs (graphrunner) at once and time them until their last step commits."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import redis
from redis.cluster import RedisCluster

from benchmarks import baseline, graphs
from graphrunner.client import Client
from graphrunner.settings import Settings
from graphrunner.store.keys import KeySpace

POLL_SECONDS = 0.05
FINISHED = {"completed", "completed_with_errors", "failed", "cancelled", "paused"}


@dataclass(frozen=True)
class Timing:
    """One timed scenario: `chains` chains of `steps` steps each, submit to last commit."""

    chains: int
    steps: int
    seconds: float

    @property
    def total_steps(self) -> int:
        """Steps taken by all chains together."""
        return self.chains * self.steps

    @property
    def rate(self) -> float:
        """Steps per second."""
        return self.total_steps / self.seconds


class Driver(Protocol):
    """What the harness needs of either side."""

    @property
    def poll(self) -> redis.Redis | RedisCluster:
        """The client of the harness's own polling."""
        ...

    @property
    def polls(self) -> int:
        """How many polling commands the driver has sent so far."""
        ...

    def run(self, chains: int, steps: int, timeout: float) -> Timing:
        """Start `chains` chains of `steps` steps at once; wait for all; time submit to last commit."""
        ...

    def close(self) -> None:
        """Release the driver's connections."""
        ...


def poll_client(url: str) -> redis.Redis:
    """A single-connection client for the harness's own polling (so MONITOR can tell it apart)."""
    return redis.Redis.from_url(url, decode_responses=True, single_connection_client=True)


def cluster_poll_client(url: str) -> RedisCluster:
    """A Redis Cluster client for polling, from a `redis+cluster://host:port/0` URL (any node)."""
    return RedisCluster.from_url(f"redis://{urlsplit(url).netloc}", decode_responses=True)


class BaselineDriver:
    """Drives the bare Celery baseline: chains of `bench.step` tasks over a JSON state per chain."""

    def __init__(self, url: str, prefetch: int, events: bool) -> None:
        self.app = baseline.create_app(url, prefetch=prefetch, events=events)
        self.poll = poll_client(url)
        self.polls = 0

    def run(self, chains: int, steps: int, timeout: float) -> Timing:
        """Start `chains` chains of `steps` steps at once; wait for all; time submit to last commit."""
        keys = [baseline.state_key(uuid.uuid4().hex) for _ in range(chains)]
        self.poll.mset({key: json.dumps({"n": 0, "t": 0.0}) for key in keys})
        started = time.time()
        for key in keys:
            self.app.send_task(baseline.TASK_NAME, args=[key, steps], queue=baseline.QUEUE)
        deadline = time.monotonic() + timeout
        last = max(self._wait(key, steps, deadline) for key in keys)
        return Timing(chains, steps, last - started)

    def _wait(self, key: str, steps: int, deadline: float) -> float:
        """The commit time of the chain's last step, once it is there."""
        while time.monotonic() < deadline:
            state = json.loads(self.poll.get(key) or "{}")
            self.polls += 1
            if state.get("n") == steps:
                return float(state["t"])
            time.sleep(POLL_SECONDS)
        raise TimeoutError(f"baseline chain {key} did not finish in time")

    def close(self) -> None:
        """Release the driver's connections."""
        self.app.close()
        self.poll.close()


class GraphDriver:
    """Drives graphrunner: runs of a loop graph submitted through the public `Client`.

    `url` is the run state's store: one Redis (also the broker unless `broker_url` names another,
    e.g. RabbitMQ), or a Redis Cluster (`redis+cluster://`) with `broker_url` naming the broker
    (and `result_backend_url` a Redis for Celery's results, when the broker is not a Redis).
    """

    def __init__(
        self,
        url: str,
        prefetch: int,
        kind: str,
        *,
        events: bool = False,
        broker_url: str | None = None,
        result_backend_url: str | None = None,
    ) -> None:
        settings = Settings(
            redis_url=url,
            broker_url=broker_url,
            result_backend_url=result_backend_url,
            prefetch=prefetch,
            quiet=True,
            task_events=events,
        )
        self.client = Client(settings=settings)
        self.graph = graphs.load(kind, settings)
        self.poll: redis.Redis | RedisCluster
        if settings.clustered:
            self.keys = KeySpace(settings.cluster_shards)
            self.poll = cluster_poll_client(url)
        else:
            self.keys = KeySpace()
            self.poll = poll_client(url)
        self.polls = 0

    def run(self, chains: int, steps: int, timeout: float) -> Timing:
        """Start `chains` runs of `steps` steps at once; wait for all; time submit to last commit."""
        started = time.time()
        ids = [self.client.submit(self.graph, {"limit": steps}).id for _ in range(chains)]
        deadline = time.monotonic() + timeout
        last = max(self._wait(run_id, steps, deadline) for run_id in ids)
        return Timing(chains, steps, last - started)

    def _wait(self, run_id: str, steps: int, deadline: float) -> float:
        """The commit time of the run's last step, once the run has finished."""
        while time.monotonic() < deadline:
            status, step, updated = self.poll.hmget(self.keys.run(run_id), "status", "step", "updated_at")
            self.polls += 1
            if status in FINISHED:
                _check_run(run_id, status, step, steps)
                return int(str(updated)) / 1000
            time.sleep(POLL_SECONDS)
        raise TimeoutError(f"graphrunner run {run_id} did not finish in time")

    def close(self) -> None:
        """Release the driver's connections."""
        self.client.close()
        self.poll.close()


def _check_run(run_id: str, status: Any, step: Any, steps: int) -> None:
    """Raise unless the run completed after exactly `steps` steps."""
    if status != "completed" or int(step) != steps:
        raise RuntimeError(
            f"run {run_id} ended {status} after {step} steps, expected completed after {steps}"
        )
