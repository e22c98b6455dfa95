"""The envelopes a commit pushes onto the queue are the messages kombu's Redis transport would write."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from support import settings_of

from graphrunner.client import Client
from graphrunner.cluster.transport.app import create_app
from graphrunner.cluster.transport.envelope import SENT_HEADER, Envelope, sent_at
from graphrunner.cluster.transport.messages import STEP_TASK, Outgoing
from graphrunner.embedded import EmbeddedRedis

QUEUE = "envelope-test"
# what differs from message to message, or from process to process
VARYING = {"id", "root_id", "correlation_id", "delivery_tag", "reply_to", "origin", "argsrepr"}


@pytest.fixture
def raw(redis_server: EmbeddedRedis) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url.replace("/0", "/6"), decode_responses=True)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


def without_varying(envelope: dict[str, Any]) -> dict[str, Any]:
    """The envelope with its ids and origin blanked, its body decoded."""
    headers = {k: ("*" if k in VARYING else v) for k, v in envelope["headers"].items()}
    props = {k: ("*" if k in VARYING else v) for k, v in envelope["properties"].items()}
    body = json.loads(base64.b64decode(envelope["body"]))
    return {**envelope, "headers": headers, "properties": props, "body": body}


def test_an_envelope_matches_what_celery_and_kombu_publish(raw: redis.Redis) -> None:
    url = raw.connection_pool.connection_kwargs
    settings = settings_of(redis_url=f"redis://127.0.0.1:{url['port']}/6")
    app = create_app(settings)
    args = ["run-1", 3, 2]
    try:
        app.send_task(STEP_TASK, args=args, queue=QUEUE, shadow="g:node", ignore_result=True)
        [kombus] = raw.lrange(QUEUE, 0, -1)
    finally:
        app.close()
    tag, ours = Envelope().encode(Outgoing(task=STEP_TASK, args=tuple(args), queue=QUEUE, shadow="g:node"))
    theirs, mine = json.loads(kombus), json.loads(ours)
    assert mine["properties"]["delivery_tag"] == mine["headers"]["id"] == tag
    assert isinstance(mine["headers"].pop(SENT_HEADER), int)  # graphrunner's one addition
    assert without_varying(mine) == without_varying(theirs)
    assert sent_at(ours) is not None and sent_at(kombus) is None


def test_a_worker_runs_a_step_message_pushed_by_a_commit(cluster: Client) -> None:
    run = cluster.submit(Path(__file__).parents[2] / "graphs" / "hello.yaml", {"name": "Envelope"})
    result = run.wait(timeout=30)
    assert result.status == "completed"
    assert all(record["worker"] for record in result.steps)
