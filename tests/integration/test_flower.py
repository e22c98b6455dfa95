"""`graphrunner flower` serves Flower against the configured broker, behind basic auth, read-only."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis
from worker_procs import process_env

from graphrunner.embedded import EmbeddedRedis, free_port

USER = "ops:s3cret-for-tests"
FORGED_ITEM = {"args": [{"run_id": "forged", "node": "fan", "index": 0, "item": "rm -rf /"}]}
CONTROL_ROUTES = [
    "/api/task/send-task/graphrunner.item",
    "/api/task/apply/graphrunner.item",
    "/api/task/async-apply/graphrunner.item",
    "/api/task/revoke/0b8a2c1e-0000-4000-8000-000000000000?terminate=true",
    "/api/task/abort/0b8a2c1e-0000-4000-8000-000000000000",
    "/api/task/rate-limit/graphrunner.item",
    "/api/task/timeout/graphrunner.item",
    "/api/worker/shutdown/celery@host",
    "/api/worker/pool/restart/celery@host",
    "/api/worker/pool/grow/celery@host",
    "/api/worker/pool/shrink/celery@host",
    "/api/worker/pool/autoscale/celery@host",
    "/api/worker/queue/add-consumer/celery@host",
    "/api/worker/queue/cancel-consumer/celery@host",
]


def basic(credential: bytes) -> str:
    return "Basic " + base64.b64encode(credential).decode()


def call(
    url: str,
    *,
    auth: str | None = None,
    method: str = "GET",
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, str]:
    """`(status, body text)` of one request to `url` (loopback only)."""
    sent = dict(headers or {})
    if auth is not None:
        sent["Authorization"] = auth
    data = None
    if body is not None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=sent, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status), response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


@contextmanager
def running_flower(redis_url: str, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`graphrunner flower ARGS` on a free loopback port, up (its health check answers); its base URL."""
    port = free_port()
    command = [sys.executable, "-m", "graphrunner", "flower", f"--port={port}", *args]
    proc = subprocess.Popen(
        command,
        env={**process_env(redis_url), **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if call(f"{base}/healthcheck")[0] == 200:
                    break
            except (urllib.error.URLError, ConnectionError):
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "Flower did not start"
            time.sleep(0.2)
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)


def refused_at_start(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "graphrunner", "flower", *args]
    return subprocess.run(
        command, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=60
    )


@pytest.fixture(scope="module")
def flower(redis_server: EmbeddedRedis) -> Iterator[str]:
    """One read-only Flower (the default) behind basic auth, for the module."""
    with running_flower(redis_server.url, "--address=127.0.0.1", f"--basic-auth={USER}") as base:
        yield base


@pytest.fixture
def broker(redis_server: EmbeddedRedis) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url)
    yield client
    client.close()


def test_flower_answers_with_auth_and_refuses_without(flower: str) -> None:
    assert call(f"{flower}/api/workers", auth=basic(USER.encode()))[0] == 200
    assert call(f"{flower}/api/workers")[0] == 401
    assert call(f"{flower}/api/workers", auth=basic(b"ops:wrong"))[0] == 401
    assert call(f"{flower}/metrics")[0] == 401
    assert call(f"{flower}/healthcheck")[0] == 200


@pytest.mark.parametrize(
    "header",
    [
        basic("ops:sécret".encode()),  # a non-ASCII password (hmac.compare_digest on str would raise)
        basic("ops:s3cret-for-tests".encode("utf-16")),  # not UTF-8
        basic(b"\xff\xfe:\x80"),  # not UTF-8 either
        basic(b"ops"),  # no colon
        "Basic !!!not-base64!!!",
        "Basic b3BzOnMzY3JldC1mb3ItdGVzdHM",  # padding missing
        "Basic é",  # a non-ASCII header value (latin-1 on the wire)
        "Bearer " + base64.b64encode(USER.encode()).decode(),
        "Basic",
    ],
)
def test_an_undecodable_credential_is_401_never_500(flower: str, header: str) -> None:
    assert call(f"{flower}/api/workers", auth=header)[0] == 401
    assert call(f"{flower}/workers", auth=header)[0] == 401


def test_a_login_cannot_send_a_forged_item_and_nothing_is_queued(flower: str, broker: redis.Redis) -> None:
    queue = f"flower-test-{uuid.uuid4().hex}"  # a queue no worker reads: whatever reached it stays there
    url = f"{flower}/api/task/send-task/graphrunner.item"
    status, text = call(url, auth=basic(USER.encode()), method="POST", body={**FORGED_ITEM, "queue": queue})
    assert status == 403
    assert "--allow-control" in text
    assert broker.keys(f"{queue}*") == []


@pytest.mark.parametrize("route", CONTROL_ROUTES)
def test_every_control_endpoint_is_refused(flower: str, route: str) -> None:
    status, text = call(f"{flower}{route}", auth=basic(USER.encode()), method="POST", body={})
    assert status == 403
    assert "--allow-control" in text


def test_reading_still_works(flower: str) -> None:
    auth = basic(USER.encode())
    for path in ("/api/workers", "/api/tasks", "/api/task/types", "/workers", "/tasks", "/broker"):
        assert call(f"{flower}{path}", auth=auth)[0] == 200, path
    query = "draw=1&start=0&length=10&order[0][column]=0&columns[0][data]=name"  # the task list's own POST
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    assert call(f"{flower}/tasks/datatable", auth=auth, method="POST", body=query, headers=headers)[0] == 200
    assert call(f"{flower}/api/tasks", auth=auth, method="PUT", body={})[0] == 403  # an unknown method


def test_a_cross_origin_read_is_refused(flower: str) -> None:
    auth = basic(USER.encode())
    assert call(f"{flower}/api/tasks", auth=auth, headers={"Origin": "http://evil.example"})[0] == 403
    assert call(f"{flower}/api/tasks", auth=auth, headers={"Origin": flower})[0] == 200


def test_allow_control_lets_send_task_through(redis_server: EmbeddedRedis, broker: redis.Redis) -> None:
    queue = f"flower-test-{uuid.uuid4().hex}"
    with running_flower(redis_server.url, f"--basic-auth={USER}", "--allow-control") as base:
        url = f"{base}/api/task/send-task/graphrunner.item"
        status, _ = call(url, auth=basic(USER.encode()), method="POST", body={**FORGED_ITEM, "queue": queue})
    try:
        assert status == 200
        assert broker.llen(queue) == 1
    finally:
        broker.delete(queue)


def test_no_auth_answers_loopback_hosts_only(redis_server: EmbeddedRedis) -> None:
    with running_flower(redis_server.url, "--no-auth") as base:
        port = base.rsplit(":", 1)[1]
        assert call(f"{base}/workers")[0] == 200
        assert call(f"{base}/workers", headers={"Host": f"localhost:{port}"})[0] == 200
        status, text = call(f"{base}/workers", headers={"Host": f"rebound.example:{port}"})
        assert status == 403 and "loopback" in text
        assert call(f"{base}/workers", headers={"Host": f"127.0.0.1.rebound.example:{port}"})[0] == 403


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--no-auth", "--address=127.evil.example"], {}, "loopback IP only"),
        (["--no-auth", "--address=localhost"], {}, "loopback IP only"),
        (["--basic-auth=ops:change-me"], {}, "placeholder"),
        ([], {"FLOWER_BASIC_AUTH": "ops:good-one,dev:Change-Me"}, "placeholder"),
    ],
)
def test_flower_refuses_to_start(args: list[str], env: dict[str, str], message: str) -> None:
    done = refused_at_start(*args, env=env)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
