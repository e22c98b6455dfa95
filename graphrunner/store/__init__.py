"""Storage of runs: the `Store` interface, its Redis implementation and an in-memory one."""

from graphrunner.store.base import Committed, Created, DeadLetter, Fence, Send, Sent, StepEntry, Store, now_ms
from graphrunner.store.query import Cursor, RunPage, RunQuery, RunSummary
from graphrunner.store.redis_store import RedisStore

__all__ = [
    "Committed",
    "Created",
    "Cursor",
    "DeadLetter",
    "Fence",
    "RedisStore",
    "RunPage",
    "RunQuery",
    "RunSummary",
    "Send",
    "Sent",
    "StepEntry",
    "Store",
    "now_ms",
]
