"""Celery's remote control, for operators: ping workers, ask who consumes a queue, purge queues."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from celery import Celery


def local_worker_name() -> str:
    """The name a worker started on this host without `-n` has: `celery@<hostname>`."""
    return f"celery@{socket.gethostname()}"


def ping(app: Celery, workers: Sequence[str] = (), timeout: float = 5.0) -> list[str]:
    """The names of the workers that answered a ping within `timeout` seconds.

    With `workers`, only those are asked and the answer comes as soon as all have replied;
    without, every worker is asked and the call waits the whole `timeout`.
    """
    destination = list(workers) or None
    replies = app.control.ping(destination=destination, timeout=timeout, limit=len(workers) or None)
    return sorted(name for reply in replies or [] for name in reply)


def consumers(app: Celery, queue: str, timeout: float = 2.0) -> list[str] | None:
    """The workers that consume `queue`, of those that said within `timeout` seconds which
    queues they consume; None when no worker answered at all.

    Every worker is asked and the call waits the whole `timeout`. A worker answers while its
    steps run (its pool runs them), unless it runs them in its main thread (`--pool solo`).
    """
    replies = app.control.inspect(timeout=timeout).active_queues()
    if not replies:
        return None
    return sorted(
        name for name, queues in replies.items() if any(q.get("name") == queue for q in queues or ())
    )


def purge(app: Celery, queues: Sequence[str]) -> dict[str, int]:
    """Drop every message waiting on each of `queues`; the number dropped per queue.

    Messages held by workers are not touched (they are acknowledged or come back when their
    worker dies), nor are timers (kept in the store, not on a queue).
    """
    dropped = {}
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        for name in dict.fromkeys(queues):
            dropped[name] = int(channel.queue_purge(name) or 0)
    return dropped
