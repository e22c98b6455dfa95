"""Storage of runs: the `Store` interface, its Redis implementation and an in-memory one."""

from graphrunner.store.base import (
    VERSIONS_KEPT,
    Ack,
    Aside,
    Committed,
    Created,
    DeadLetter,
    Fence,
    Gather,
    GraphVersion,
    Kept,
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
    "Aside",
    "Committed",
    "Created",
    "Cursor",
    "DeadLetter",
    "Fence",
    "Gather",
    "GraphVersion",
    "Kept",
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
