"""Task messages as kombu's Redis transport lays them on a queue, so a commit can push them itself.

A Celery worker consuming a Redis broker pops these JSON envelopes from the queue's list
(`BRPOP`) and decodes them exactly as if `app.send_task` had published them: Celery's task
protocol 2 (headers with the task name, id and shadow; a body of `[args, kwargs, embed]`)
inside kombu's virtual-transport envelope (base64 body, properties with the delivery tag
and routing). `tests/integration/test_envelope.py` holds it against what kombu writes.
graphrunner adds one header, `gr_sent` (ms), so the sweeper can tell how old a queued
message is.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import time
import uuid
from typing import Any

from graphrunner.cluster.transport.messages import Outgoing

EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}
SENT_HEADER = "gr_sent"


class Envelope:
    """Builds kombu Redis envelopes for `Outgoing` messages from this process."""

    def __init__(self) -> None:
        self.origin = f"gen{os.getpid()}@{socket.gethostname()}"
        self.reply_to = str(uuid.uuid4())

    def encode(self, out: Outgoing) -> tuple[str, str]:
        """(delivery tag, envelope JSON) of `out`; the tag is also the task id."""
        tag = str(uuid.uuid4())
        args = list(out.args)
        body = json.dumps([args, {}, EMBED]).encode()
        envelope = {
            "body": base64.b64encode(body).decode(),
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": self._headers(out, tag, args),
            "properties": {
                "correlation_id": tag,
                "reply_to": self.reply_to,
                "delivery_mode": 2,
                "delivery_info": {"exchange": "", "routing_key": out.queue},
                "priority": 0,
                "body_encoding": "base64",
                "delivery_tag": tag,
            },
        }
        return tag, json.dumps(envelope)

    def _headers(self, out: Outgoing, tag: str, args: list[Any]) -> dict[str, Any]:
        return {
            "lang": "py",
            "task": out.task,
            "id": tag,
            "shadow": out.shadow,
            "eta": None,
            "expires": None,
            "group": None,
            "group_index": None,
            "retries": 0,
            "timelimit": [None, None],
            "root_id": tag,
            "parent_id": None,
            "argsrepr": repr(args)[:1024],
            "kwargsrepr": "{}",
            "origin": self.origin,
            "ignore_result": True,
            "replaced_task_nesting": 0,
            "stamped_headers": None,
            "stamps": {},
            SENT_HEADER: int(time.time() * 1000),
        }


def sent_at(raw: str) -> int | None:
    """The `gr_sent` time (ms) of a queued envelope, None when it has none (not graphrunner's)."""
    try:
        value = json.loads(raw).get("headers", {}).get(SENT_HEADER)
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) else None
