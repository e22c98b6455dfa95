"""Integration-test fixtures; `redis_server` and `cluster` (one real Redis and one in-thread worker
per session) are in tests/conftest.py, shared with tests/conformance."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import FAILED
from worker_procs import process_env

from graphrunner.embedded import EmbeddedRedis

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    """Mark a test whose call failed, so its fixtures can print what explains it at teardown."""
    report: pytest.TestReport = yield
    if report.when == "call" and report.failed:
        item.stash[FAILED] = True
    return report


@pytest.fixture
def worker_env(redis_server: EmbeddedRedis) -> dict[str, Any]:
    """The environment of a worker process: this Redis, and the tests' helper modules importable."""
    return process_env(redis_server.url)
