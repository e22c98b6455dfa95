"""Storage of runs: the `Store` interface, its Redis implementation and an in-memory one."""

from graphrunner.store.base import (
    VERSIONS_KEPT,
    Ack,
    Committed,
    Created,
    DeadLetter,
    Fence,
    Gather,
    GraphVersion,
    Saved,
    Send,
    Sent,
    StepEntry,
    Store,
    existing_run,
    now_ms,
)
from graphrunner.store.query import Cursor, RunPage, RunQuery, RunSummary
from graphrunner.store.redis_store import RedisStore

__all__ = [
    "VERSIONS_KEPT",
    "Ack",
    "Committed",
    "Created",
    "Cursor",
    "DeadLetter",
    "Fence",
    "Gather",
    "GraphVersion",
    "RedisStore",
    "RunPage",
    "RunQuery",
    "RunSummary",
    "Saved",
    "Send",
    "Sent",
    "StepEntry",
    "Store",
    "existing_run",
    "now_ms",
]
