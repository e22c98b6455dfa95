"""A task's message acknowledged by the write that handles it (a Redis broker on the store's Redis).

kombu's Redis transport keeps a delivered message in two keys until it is acknowledged: the hash
`unacked` (tag to message) and the sorted set `unacked_index` (tag to delivery time). With
`acks_late`, the worker's main process removes both after the task returns, in a MULTI/EXEC
round trip of its own. When the broker is the store's Redis, the commit script removes them
instead, in the same atomic write as the step (and the item save script for a foreach item
message): a committed step's message can then never be restored and delivered again, and the
main process is spared a round trip per message.

- Pool side: the task handles its message inside `handling(tag)`; the executor's commit (or
  the item runner's save) takes `current()` and, when the store acknowledged the message, the
  task says so in its return value (`acked_outcome`).
- Main side: `guard.CommitAckedRequest` reads that return value and tells the channel's QoS
  (`GuardedQoS.acked_at_commit`) that only its in-memory bookkeeping is left to do.

A message whose handling commits nothing (a stale duplicate, a refused body, an exception) is
acknowledged by the main process as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from graphrunner.cluster.transport.broker import UNACKED, UNACKED_INDEX
from graphrunner.store import Ack

ACKED = " (acknowledged at commit)"  # the end of the outcome a task returns when its commit acked


@dataclass
class Delivery:
    """The message a task is handling, and whether a commit has acknowledged it."""

    tag: str
    acked: bool = False

    def pending(self) -> Ack | None:
        """What a commit should acknowledge: the message, unless a commit already did."""
        return None if self.acked else Ack(self.tag, UNACKED, UNACKED_INDEX)


_current: ContextVar[Delivery | None] = ContextVar("graphrunner_delivery", default=None)


def current() -> Delivery | None:
    """The message the running task handles, when its commit may acknowledge it."""
    return _current.get()


@contextmanager
def handling(tag: str | None) -> Iterator[Delivery | None]:
    """Handle the message tagged `tag` (None: the commit acknowledges nothing)."""
    delivery = Delivery(tag) if tag else None
    token = _current.set(delivery)
    try:
        yield delivery
    finally:
        _current.reset(token)


def acked_outcome(outcome: str, delivery: Delivery | None) -> str:
    """The task's return value: `outcome`, marked when a commit acknowledged the message."""
    return outcome + ACKED if delivery is not None and delivery.acked else outcome


def delivery_tag(request: Any) -> str | None:
    """The delivery tag of the message a task request came in (kombu's Redis transport)."""
    properties = getattr(request, "properties", None)
    tag = properties.get("delivery_tag") if isinstance(properties, dict) else None
    return tag if isinstance(tag, str) and tag else None


def was_acked(retval: Any) -> bool:
    """Whether a task's return value, as the worker's main process gets it (its repr), says that
    its commit acknowledged the message."""
    return isinstance(retval, str) and retval.rstrip("'\"").endswith(ACKED)
