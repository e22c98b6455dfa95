"""Single step against a configured Redis: `Client.step` and `graphrunner step` store nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def empty_db(redis_server: EmbeddedRedis) -> Iterator[str]:
    """The URL of a database of the session's Redis that no other test uses, emptied."""
    url = redis_server.url.rsplit("/", 1)[0] + "/11"
    conn = redis.Redis.from_url(url)
    conn.flushdb()
    yield url
    conn.flushdb()
    conn.close()


def keys(url: str) -> list[bytes]:
    conn = redis.Redis.from_url(url)
    try:
        return list(conn.scan_iter("*"))
    finally:
        conn.close()


def test_client_step_creates_no_run(empty_db: str) -> None:
    with Client(empty_db) as client:
        report = client.step(ROOT / "graphs" / "branching.yaml", "grade", inputs={"score": 80})
        assert report.next_node == "publish"
        assert report.state["grade"] == "pass"
        assert client.list_runs() == []
    assert keys(empty_db) == []


def test_cli_step_with_redis_configured_creates_no_run(empty_db: str) -> None:
    env = {**os.environ, "GRAPHRUNNER_REDIS_URL": empty_db, "GRAPHRUNNER_QUIET": "1"}
    command = [sys.executable, "-m", "graphrunner", "step", "graphs/branching.yaml", "--node", "review"]
    proc = subprocess.run(
        [*command, "-i", "score=20", "--json"],
        capture_output=True,
        encoding="utf-8",
        env=env,
        cwd=ROOT,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert (data["executed_node"], data["next_node"], data["step_count"]) == ("review", "recover", 1)
    assert data["error"]["error_type"] == "NeedsReview"
    assert keys(empty_db) == []
