"""`graphrunner flower` serves Flower against the configured broker, behind basic auth."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any

from graphrunner.embedded import EmbeddedRedis, free_port


def get(url: str, auth: str | None = None) -> int:
    headers = {"Authorization": "Basic " + base64.b64encode(auth.encode()).decode()} if auth else {}
    try:
        return int(urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=2).status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_flower_answers_with_auth_and_refuses_without(
    redis_server: EmbeddedRedis, worker_env: dict[str, Any]
) -> None:
    port = free_port()
    args = [
        sys.executable,
        "-m",
        "graphrunner",
        "flower",
        f"--port={port}",
        "--address=127.0.0.1",
        "--basic-auth=ops:secret",
    ]
    proc = subprocess.Popen(
        args, env=worker_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}/api/workers"
    try:
        deadline = time.monotonic() + 30
        status = None
        while status is None and time.monotonic() < deadline:
            try:
                status = get(url, "ops:secret")
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.3)
        assert status == 200
        assert get(url) == 401
        assert get(url, "ops:wrong") == 401
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
