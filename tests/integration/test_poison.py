"""Poison messages (issue 12): nothing written to the queue stops a worker or is redelivered forever.

Each forged message is pushed onto a real worker process's queue the way an attacker (or a
broken producer) would, with LPUSH. The worker must refuse it (dead letter, counted,
acknowledged), keep running, and still run a real graph afterwards.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import uid, wait_for
from worker_procs import WorkerProcess

from graphrunner import parse_graph
from graphrunner.client import Client
from graphrunner.cluster.transport.broker import UNACKED
from graphrunner.embedded import EmbeddedRedis

QUEUE = "graphrunner"
GRAPH = """
    id: poison/after
    state: {n: {type: integer, default: 0}}
    config: {start: a}
    nodes:
      a: {type: gate, assign: {n: 1}}
"""


def envelope(
    task: str | None, body: Any, content_type: str = "application/json", **extra: Any
) -> dict[str, Any]:
    """A kombu envelope around `body` (JSON-encoded and base64'd unless it is bytes already)."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"task": task, "id": uid()} if task is not None else {}
    message = {
        "body": base64.b64encode(raw).decode(),
        "content-encoding": "utf-8",
        "content-type": content_type,
        "headers": headers,
        "properties": {
            "delivery_tag": uid(),
            "delivery_info": {"exchange": "", "routing_key": QUEUE},
            "body_encoding": "base64",
            "priority": 0,
        },
    }
    message.update(extra)
    return message


STEP, ITEM = "graphrunner.step", "graphrunner.item"
FORGED: dict[str, Any] = {
    "step, empty content type, not a triple": envelope(STEP, b"abcdef", ""),
    "step, application/data": envelope(STEP, b"[1, 2]", "application/data"),
    "item with body {}": envelope(ITEM, {}),
    "step with body 'str'": envelope(STEP, "str"),
    "step with body null": envelope(STEP, None),
    "step with a text/plain body": envelope(STEP, b"hello", "text/plain"),
    "step with wrong arguments": envelope(STEP, [["run"], {}, {}]),
    "step with keyword arguments": envelope(STEP, [[], {"evil": True}, {}]),
    "item with a bad payload": envelope(ITEM, [[{"run_id": "x"}], {}, {}]),
    "unknown task": envelope("os.system", [["rm -rf /"], {}, {}]),
    "task header without an id": {**envelope(STEP, [["r", 0], {}, {}]), "headers": {"task": STEP}},
    "no task header, body not JSON": envelope(None, b"\xff\xfe not json"),
    "headers not a mapping": {**envelope(STEP, [["r", 0], {}, {}]), "headers": ["task"]},
    "no properties": {"body": "", "headers": {}},
    "delivery tag not a string": envelope(STEP, [["r", 0], {}, {}], properties={"delivery_tag": 5}),
    "body not base64": {**envelope(STEP, [["r", 0], {}, {}]), "body": "***not base64***"},
    "a JSON list, not an envelope": [1, 2, 3],
    "not JSON at all": "this is not JSON {",
}


@pytest.fixture(scope="module")
def poisoned(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[EmbeddedRedis, WorkerProcess, Client]]:
    """A private Redis with one worker process, shared by this module's tests."""
    root = Path(__file__).resolve().parents[2]
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(root / "tests" / "integration"),
        "GRAPHRUNNER_QUIET": "1",
        "PYTHONUNBUFFERED": "1",
    }
    with EmbeddedRedis() as server:
        worker = WorkerProcess(
            f"poison-{uid()}", {**env, "GRAPHRUNNER_REDIS_URL": server.url}, tmp_path_factory.mktemp("poison")
        )
        client = Client(server.url)
        try:
            worker.wait_ready()
            yield server, worker, client
        finally:
            client.close()
            worker.stop()


def push(server: EmbeddedRedis, entry: Any) -> None:
    raw = redis.Redis.from_url(server.url)
    try:
        raw.lpush(QUEUE, entry if isinstance(entry, str) else json.dumps(entry))
    finally:
        raw.close()


def drained(client: Client) -> bool:
    """Nothing waits on the queue and the worker holds nothing."""
    raw: Any = client.store.redis  # type: ignore[attr-defined]
    return raw.llen(QUEUE) == 0 and raw.hlen(UNACKED) == 0


def still_serving(worker: WorkerProcess, client: Client) -> None:
    assert worker.process.poll() is None, worker.log.read_text()[-3000:]
    result = client.submit(parse_graph(textwrap.dedent(GRAPH))).wait(timeout=30)
    assert result.status == "completed" and result.state == {"n": 1}


@pytest.mark.parametrize("name", sorted(FORGED))
def test_a_forged_message_is_refused_and_the_worker_goes_on(
    name: str, poisoned: tuple[EmbeddedRedis, WorkerProcess, Client]
) -> None:
    server, worker, client = poisoned
    before = client.store.dead_total()
    push(server, FORGED[name])
    wait_for(
        lambda: client.store.dead_total() == before + 1 and drained(client), 30, "the message to be refused"
    )
    [letter] = client.store.dead_letters(1)
    assert letter.reason  # says what was wrong
    still_serving(worker, client)


def test_graphrunner_queues_shows_the_dead_letters(
    poisoned: tuple[EmbeddedRedis, WorkerProcess, Client],
) -> None:
    server, _, client = poisoned
    push(server, FORGED["unknown task"])
    wait_for(lambda: client.store.dead_total() >= 1 and drained(client), 30, "the message to be refused")
    shown = subprocess.run(
        [sys.executable, "-m", "graphrunner", "queues", "--dead", "1", "--json"],
        env={"PATH": "/usr/bin:/bin", "GRAPHRUNNER_REDIS_URL": server.url},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    report = json.loads(shown.stdout)
    assert report["dead_letters"] == client.store.dead_total() and report["queues"][QUEUE] == 0
    assert "unknown task 'os.system'" in report["dead"][0]["reason"]
    assert report["last_sweep_s"] is None or report["last_sweep_s"] >= 0


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "body": JSONISH | st.binary(max_size=40).map(lambda b: base64.b64encode(b).decode()),
        "content-type": st.sampled_from(["application/json", "", "application/data", "text/plain"]) | JSONISH,
        "content-encoding": st.sampled_from(["utf-8", "binary"]) | JSONISH,
        "headers": st.fixed_dictionaries(
            {}, optional={"task": st.sampled_from([STEP, ITEM, "x.y"]) | JSONISH, "id": JSONISH}
        )
        | JSONISH,
        "properties": st.fixed_dictionaries(
            {},
            optional={
                "delivery_tag": st.uuids().map(str) | JSONISH,
                "body_encoding": st.sampled_from(["base64", None]) | JSONISH,
                "delivery_info": JSONISH,
            },
        )
        | JSONISH,
    },
)
RAW = FIELDS.map(json.dumps) | JSONISH.map(json.dumps) | st.text(max_size=60)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(entry=RAW)
def test_random_queue_entries_never_stop_the_worker(
    entry: str, poisoned: tuple[EmbeddedRedis, WorkerProcess, Client]
) -> None:
    server, worker, client = poisoned
    push(server, entry)
    wait_for(lambda: drained(client), 30, "the entry to be taken off the queue")
    assert worker.process.poll() is None, worker.log.read_text()[-3000:]


def test_the_worker_serves_after_the_random_entries(
    poisoned: tuple[EmbeddedRedis, WorkerProcess, Client],
) -> None:
    _, worker, client = poisoned
    still_serving(worker, client)
