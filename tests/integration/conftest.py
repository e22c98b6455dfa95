"""Integration-test fixtures; `redis_server` and `cluster` (one real Redis and one in-thread worker
per session) are in tests/conftest.py, shared with tests/conformance."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from graphrunner.embedded import EmbeddedRedis

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@pytest.fixture
def worker_env(redis_server: EmbeddedRedis) -> dict[str, Any]:
    """The environment of a worker process: this Redis, and the tests' helper modules importable."""
    return process_env(redis_server.url)


def process_env(redis_url: str) -> dict[str, Any]:
    """The environment of a worker process for `redis_url` (see `worker_env`)."""
    path = os.pathsep.join([str(HERE), str(ROOT / "tests" / "unit"), os.environ.get("PYTHONPATH", "")])
    return {
        **os.environ,
        "GRAPHRUNNER_REDIS_URL": redis_url,
        "PYTHONPATH": path,
        "GRAPHRUNNER_QUIET": "1",
        "PYTHONUNBUFFERED": "1",
        "EXECUTABLE": sys.executable,
    }
