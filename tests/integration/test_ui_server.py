"""`graphrunner ui` as a process: it refuses to start without auth, and `UiServer`, which the other
test_ui_* modules use, starts it against the session's Redis on a free port."""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import httpx
import pytest
from click.testing import CliRunner

from graphrunner.cli import main
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis

ROOT = Path(__file__).resolve().parents[2]
USER, PASSWORD = "ops", "s3cret"
START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def auth_header(user: str = USER, password: str = PASSWORD) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class UiServer:
    """`python -m graphrunner ui` on a free loopback port, stopped (by its pid) on exit."""

    def __init__(
        self, redis_url: str, graph_path: Path, *args: str, env: Mapping[str, str] | None = None
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env_extra = env
        env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHRUNNER_")}
        env |= {"GRAPHRUNNER_REDIS_URL": redis_url, "GRAPHRUNNER_GRAPH_PATH": str(graph_path)}
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests" / "integration"), env.get("PYTHONPATH", "")])
        env |= env_extra or {}
        self.command = [sys.executable, "-m", "graphrunner", "ui", "--port", str(self.port), *args]
        self.env = env
        self.process: subprocess.Popen[str] | None = None

    def __enter__(self) -> UiServer:
        self.process = subprocess.Popen(
            self.command, cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"graphrunner ui exited: {self.process.stdout.read() if self.process.stdout else ''}"
                )
            try:
                if httpx.get(self.url + "/healthcheck", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                time.sleep(0.2)  # polling until the server answers, not a timing assertion
        self.__exit__(None, None, None)
        raise RuntimeError("graphrunner ui did not answer /healthcheck")

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=20)
        if self.process.stdout is not None:
            self.process.stdout.close()


def test_it_refuses_to_start_without_auth() -> None:
    out = CliRunner().invoke(main, ["ui"], env={"GRAPHRUNNER_REDIS_URL": "redis://127.0.0.1:1/0"})
    assert out.exit_code == 2
    assert "needs authentication: give --basic-auth=user:password" in out.stderr


@pytest.mark.parametrize("address", ["0.0.0.0", "127.evil.example", "localhost.evil"])
def test_no_auth_serves_on_a_loopback_ip_only(address: str) -> None:
    out = CliRunner().invoke(
        main,
        ["ui", "--no-auth", "--address", address],
        env={"GRAPHRUNNER_REDIS_URL": "redis://127.0.0.1:1/0"},
    )
    assert out.exit_code == 2
    assert (
        f"--no-auth serves the run explorer on a loopback IP address only (127.0.0.1, ::1), not on --address={address}"
        in out.stderr
    )


def test_a_malformed_credential_is_refused() -> None:
    out = CliRunner().invoke(
        main, ["ui", "--basic-auth", "nopassword"], env={"GRAPHRUNNER_REDIS_URL": "redis://127.0.0.1:1/0"}
    )
    assert out.exit_code == 2 and "is not user:password" in out.stderr


def test_credentials_are_read_from_the_environment_too() -> None:
    env = {"GRAPHRUNNER_REDIS_URL": "redis://127.0.0.1:1/0", "GRAPHRUNNER_UI_BASIC_AUTH": "nopassword"}
    out = CliRunner().invoke(main, ["ui"], env=env)
    assert out.exit_code == 2 and "'nopassword' is not user:password" in out.stderr


def test_no_auth_on_loopback_serves_without_credentials_to_loopback_hosts_only(
    redis_server: EmbeddedRedis, cluster: Client, tmp_path: Path
) -> None:
    """DNS rebinding: a page at http://evil.example:PORT whose name now resolves to 127.0.0.1 sends
    `Host: evil.example:PORT` and its own `Origin`; without auth, only the Host check stops it."""
    graph_id = unique("ui/echo")
    (tmp_path / "echo.yaml").write_text(
        f"id: {graph_id}\nconfig: {{start: a}}\nnodes: {{a: {{action: {{tool: echo}}}}}}\n"
    )
    with UiServer(redis_server.url, tmp_path, "--no-auth") as server:
        answer = httpx.get(server.url + "/api/runs", timeout=30)
        assert answer.status_code == 200 and "runs" in answer.json()
        evil = f"evil.example:{server.port}"
        rebound = {"Host": evil, "Origin": f"http://{evil}"}
        submit = httpx.post(server.url + "/api/runs", json={"graph": graph_id}, headers=rebound, timeout=30)
        assert submit.status_code == 421, submit.text
        assert "Host 'evil.example" in submit.json()["error"]["message"]
        read = httpx.get(server.url + "/api/runs", headers={"Host": evil}, timeout=30)
        assert read.status_code == 421 and read.json()["error"]["type"] == "MisdirectedRequest"
        assert httpx.get(server.url + "/", headers={"Host": evil}, timeout=30).status_code == 421
        assert httpx.get(server.url + "/healthcheck", headers={"Host": evil}, timeout=30).text == "OK"
        local = {"Host": f"localhost:{server.port}", "Origin": f"http://evil.example:{server.port}"}
        cross = httpx.post(server.url + "/api/runs", json={"graph": graph_id}, headers=local, timeout=30)
        assert cross.status_code == 403  # a loopback Host with a foreign Origin: cross-site
        assert (
            httpx.get(server.url + "/api/runs", params={"graph": graph_id}, timeout=30).json()["runs"] == []
        )
        me = httpx.get(server.url + "/api/me", timeout=30).json()
        assert me == {"user": None, "capabilities": ["tool:echo", "tool:fail", "tool:sleep"]}


def test_a_public_url_lets_pages_served_through_a_proxy_act(
    redis_server: EmbeddedRedis, cluster: Client, tmp_path: Path
) -> None:
    """Behind a TLS proxy the page's origin is `https://host`, not the server's own address."""
    graph = tmp_path / "parked.yaml"
    graph.write_text(
        f"id: {unique('ui/parked')}\nconfig: {{start: wait}}\n"
        "nodes: {wait: {type: pause, message: later, next: done}, done: {type: return}}\n"
    )
    run = cluster.submit(str(graph))
    assert run.wait(timeout=60).status == "paused"
    public = ("--public-url", "https://runs.example.com/explorer", "--basic-auth", f"{USER}:{PASSWORD}")
    with UiServer(redis_server.url, tmp_path, *public) as server:
        url = f"{server.url}/api/runs/{run.id}/cancel"
        for origin in ("https://evil.example", "http://runs.example.com"):
            headers = auth_header() | {"Origin": origin}
            assert httpx.post(url, json={}, headers=headers, timeout=30).status_code == 403, origin
        assert run.status() == "paused"
        headers = auth_header() | {"Origin": "https://runs.example.com"}
        assert httpx.post(url, json={}, headers=headers, timeout=30).status_code == 200
    assert run.wait(timeout=60).status == "cancelled"


def test_a_public_url_that_is_not_one_is_refused() -> None:
    env = {"GRAPHRUNNER_REDIS_URL": "redis://127.0.0.1:1/0"}
    out = CliRunner().invoke(main, ["ui", "--no-auth", "--public-url", "runs.example.com"], env=env)
    assert (
        out.exit_code == 2
        and "--public-url 'runs.example.com' is not an http:// or https:// URL" in out.stderr
    )
