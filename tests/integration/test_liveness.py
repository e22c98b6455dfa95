"""`graphrunner alive`, the worker's liveness probe: it reads the file a `graphrunner worker`
process keeps touching and asks no one over the network, so a Redis outage does not fail it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from support import wait_for
from worker_procs import WorkerProcess, process_env

from graphrunner.embedded import EmbeddedRedis, free_port

CLOSED = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens: the probe must not need Redis


def probe(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`graphrunner alive` for `path`, with a Redis URL that nothing answers."""
    env = {**os.environ, "GRAPHRUNNER_REDIS_URL": CLOSED, "GRAPHRUNNER_LIVENESS_FILE": str(path)}
    command = [sys.executable, "-m", "graphrunner", "alive", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)


def touched_after(path: Path, moment: float) -> bool:
    return path.exists() and path.stat().st_mtime > moment


def test_a_worker_stays_alive_through_a_redis_outage_and_removes_its_file_when_it_stops(
    private_redis: EmbeddedRedis, tmp_path: Path
) -> None:
    path = tmp_path / "worker.alive"
    missing = probe(path)
    assert missing.returncode == 1 and "no liveness file" in missing.stderr, missing
    env = {**process_env(private_redis.url), "GRAPHRUNNER_LIVENESS_FILE": str(path)}
    worker = WorkerProcess("alive", env, tmp_path)
    try:
        worker.wait_ready(timeout=60)
        started = time.time()
        wait_for(lambda: touched_after(path, started), 30, "a touch from the consumer's loop")
        answer = probe(path)
        assert answer.returncode == 0, answer.stderr
        assert "alive:" in answer.stdout

        private_redis.stop()  # the broker and the store away: the consumer reconnects, with backoff
        down = time.time()
        wait_for(lambda: touched_after(path, down + 1), 60, "a touch while Redis is away")
        assert probe(path).returncode == 0

        private_redis.start()
        back = time.time()
        wait_for(lambda: worker.log.read_text().count("] Connected to ") >= 2, 90, "the reconnection")
        wait_for(lambda: touched_after(path, back + 1), 60, "a touch after the reconnection")
        assert probe(path).returncode == 0
    finally:
        worker.stop()
    assert worker.process.returncode == 0, worker.log.read_text()[-3000:]
    gone = probe(path)
    assert gone.returncode == 1 and "no liveness file" in gone.stderr, gone


def test_a_stale_file_fails_with_its_age(tmp_path: Path) -> None:
    path = tmp_path / "worker.alive"
    path.touch()
    old = time.time() - 120
    os.utime(path, (old, old))
    stale = probe(path)
    assert stale.returncode == 1
    assert f"liveness file {path} was last touched 12" in stale.stderr  # 120 s, or a second more
    assert "more than --max-age 60s" in stale.stderr
    assert probe(path, "--max-age", "600").returncode == 0
