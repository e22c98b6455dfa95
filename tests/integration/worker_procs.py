"""Worker processes for crash and scale tests: `graphrunner worker` in its own process group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from support import settings_of

from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis

HERE = Path(__file__).resolve().parent


def process_env(redis_url: str) -> dict[str, Any]:
    """The environment of a worker process for `redis_url` (the `worker_env` fixture's): that Redis, the tests' helper modules importable."""
    path = os.pathsep.join([str(HERE), str(HERE.parent / "unit"), os.environ.get("PYTHONPATH", "")])
    return {
        **os.environ,
        "GRAPHRUNNER_REDIS_URL": redis_url,
        "PYTHONPATH": path,
        "GRAPHRUNNER_QUIET": "1",
        "PYTHONUNBUFFERED": "1",
        "EXECUTABLE": sys.executable,
    }


class WorkerProcess:
    """`python -m graphrunner worker` started in a new session, its log in a file."""

    def __init__(self, name: str, env: dict[str, Any], log_dir: Path, concurrency: int = 1) -> None:
        self.name = name
        self.log = log_dir / f"{name}.log"
        args = [
            sys.executable,
            "-m",
            "graphrunner",
            "worker",
            "-c",
            str(concurrency),
            "-n",
            f"{name}@%h",
            "--without-mingle",
            "--without-gossip",
            "--without-heartbeat",
            "--loglevel=INFO",
        ]
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def wait_ready(self, timeout: float = 30) -> None:
        """Block until the worker logs that it is ready."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if " ready." in self.log.read_text(errors="replace"):
                return
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"worker {self.name} exited: {self.log.read_text(errors='replace')[-2000:]}"
                )
            time.sleep(0.1)
        raise TimeoutError(f"worker {self.name} not ready after {timeout}s")

    def owns(self, pid: int) -> bool:
        """True when `pid` is this worker's main process or one of its pool processes."""
        try:
            return os.getpgid(pid) == self.process.pid
        except ProcessLookupError:
            return False

    def kill(self) -> None:
        """SIGKILL the whole worker: main process and pool, no chance to clean up."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        """Warm shutdown, then SIGKILL if it does not stop in time."""
        if self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()


@contextmanager
def dedicated_worker(
    redis_server: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path, concurrency: int = 1, **env: str
) -> Iterator[Client]:
    """A `graphrunner worker` process alone on a queue of its own, and a client that sends there.

    The cluster's in-thread worker never sees these runs: every message of a run goes to the
    client's default queue (GRAPHRUNNER_QUEUE), which only this worker consumes.
    """
    queue = f"q-{uuid.uuid4().hex[:8]}"
    proc = WorkerProcess(
        queue, {**worker_env, "GRAPHRUNNER_QUEUE": queue, **env}, tmp_path, concurrency=concurrency
    )
    client = Client(settings=settings_of(redis_url=redis_server.url, queue=queue))
    try:
        proc.wait_ready()
        yield client
    finally:
        client.close()
        proc.stop()
