"""Integration-test fixtures; `redis_server` and `cluster` (one real Redis and one in-thread worker
per session) are in tests/conftest.py, shared with tests/conformance."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from worker_procs import process_env

from graphrunner.embedded import EmbeddedRedis

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@pytest.fixture
def worker_env(redis_server: EmbeddedRedis) -> dict[str, Any]:
    """The environment of a worker process: this Redis, and the tests' helper modules importable."""
    return process_env(redis_server.url)
