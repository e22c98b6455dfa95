"""A private RabbitMQ node for the tests: this machine's `rabbitmq-server`, its own node name,
ports (AMQP, distribution, epmd) and directories, stopped by PID when the tests are done.

The benchmarks' `--broker amqp` starts its node with this module too (benchmarks/rabbitmq.py
loads it from this file): one launcher for both.

It never touches a RabbitMQ already running here: the node name, every port and the Erlang
cookie (in its own HOME) are its own, and it runs its own epmd. `rabbitmq-server` (the
wrapper in PATH) drops to the `rabbitmq` user when started as root; the node is started with
the script the wrapper calls, as the current user, so its directories need no other owner.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

INSTALL = "apt-get install rabbitmq-server (Debian/Ubuntu)"
SCRIPTS = ("/usr/lib/rabbitmq/bin/rabbitmq-server",)  # what the Debian wrapper runs
WRAPPERS = ("/usr/sbin/rabbitmq-server",)  # not always on PATH


class RabbitMQUnavailable(RuntimeError):
    """rabbitmq-server is not installed, or the node did not start."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_script() -> str:
    """The rabbitmq-server start script (not the wrapper that switches users)."""
    for script in SCRIPTS:
        if os.access(script, os.X_OK):
            return script
    wrapper = shutil.which("rabbitmq-server") or next((w for w in WRAPPERS if os.access(w, os.X_OK)), None)
    if wrapper is None:
        raise RabbitMQUnavailable(f"rabbitmq-server is not installed: {INSTALL}")
    return wrapper


def epmd_binary() -> str:
    found = shutil.which("epmd") or next(iter(sorted(Path("/usr/lib/erlang").glob("erts-*/bin/epmd"))), None)
    if found is None:
        raise RabbitMQUnavailable(f"epmd (Erlang) is not installed: {INSTALL}")
    return str(found)


class RabbitMQNode:
    """`with RabbitMQNode() as node: node.url` -- amqp://guest:guest@127.0.0.1:PORT//

    `rabbit` sets parameters of the broker (the `rabbit` application's environment, as in
    advanced.config), e.g. `{"consumer_timeout": 3000, "channel_tick_interval": 1000}`: values
    are Erlang terms (integers, atoms). `restart()` stops the broker and starts it again on the
    same port, node name and data directory, so durable queues and persistent messages survive.
    """

    def __init__(
        self,
        start_timeout: float = 90.0,
        rabbit: Mapping[str, int | str] | None = None,
        prefix: str = "graphrunner-test",
    ) -> None:
        self.port = free_port()
        self.dist_port = free_port()
        self.epmd_port = free_port()
        self.name = f"{prefix}-{uuid.uuid4().hex[:8]}@localhost"
        self.start_timeout = start_timeout
        self.rabbit = dict(rabbit or {})
        self.dir = Path(tempfile.mkdtemp(prefix="graphrunner-rabbitmq-"))
        self.log = self.dir / "server.log"
        self.epmd: subprocess.Popen[bytes] | None = None
        self.server: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}//"

    def __enter__(self) -> RabbitMQNode:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _env(self) -> dict[str, str]:
        (self.dir / "enabled_plugins").write_text("[].\n")
        (self.dir / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.port}\nloopback_users = none\n"
            "log.console = true\nlog.file = false\n"
        )
        env = {
            **os.environ,
            "HOME": str(self.dir),  # the Erlang cookie lives here, not in the system node's
            "RABBITMQ_NODENAME": self.name,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "ERL_EPMD_PORT": str(self.epmd_port),
            "ERL_EPMD_ADDRESS": "127.0.0.1",  # its epmd listens on loopback only
            "RABBITMQ_MNESIA_BASE": str(self.dir / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.dir / "log"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.dir / "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": str(self.dir / "rabbitmq.conf"),
            "RABBITMQ_PID_FILE": str(self.dir / "pid"),
        }
        if self.rabbit:
            args = " ".join(f"-rabbit {key} {value}" for key, value in self.rabbit.items())
            env["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"] = args
        return env

    def start(self) -> None:
        script, env = server_script(), self._env()
        if self.epmd is None or self.epmd.poll() is not None:
            # our own epmd in the foreground, so it is ours to stop (erl would start a daemon)
            self.epmd = subprocess.Popen(
                [epmd_binary(), "-port", str(self.epmd_port)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        with self.log.open("wb") as out:  # a restart waits for its own "startup complete"
            self.server = subprocess.Popen(
                [script], env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.dir
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            assert self.server is not None
            if self.server.poll() is not None:
                raise RabbitMQUnavailable(f"rabbitmq-server exited {self.server.returncode}: {self.tail()}")
            if "Server startup complete" in self.log.read_text(errors="replace"):
                return
            time.sleep(0.2)
        raise RabbitMQUnavailable(f"rabbitmq-server not ready after {self.start_timeout:.0f}s: {self.tail()}")

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else "(no log)"

    def stop_server(self) -> None:
        """Stop the broker (SIGTERM: a clean shutdown that keeps its data), not its epmd."""
        _terminate(self.server)

    def restart(self) -> None:
        """Start the broker again after `stop_server`: same port, node name and data."""
        self.stop_server()
        self.start()

    def stop(self) -> None:
        for proc in (self.server, self.epmd):
            _terminate(proc)
        shutil.rmtree(self.dir, ignore_errors=True)


def _terminate(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM the process group of `proc` and wait for it (SIGKILL after 30 s)."""
    if proc is not None and proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@contextmanager
def started_node(**options: Any) -> Iterator[RabbitMQNode]:
    """A private node for a fixture: the test fails (never skips) naming the cause when it cannot
    start, and the node is stopped after."""
    import pytest

    try:
        node = RabbitMQNode(**options).__enter__()
    except RabbitMQUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield node
    finally:
        node.stop()
