"""Storage of runs: the `Store` interface and its Redis implementation."""

from graphrunner.store.base import Committed, Created, Fence, RunSummary, StepEntry, Store
from graphrunner.store.query import Cursor, InvalidRunQuery, RunPage, RunQuery
from graphrunner.store.redis_store import RedisStore, StoreUnavailable

__all__ = [
    "Committed",
    "Created",
    "Cursor",
    "Fence",
    "InvalidRunQuery",
    "RedisStore",
    "RunPage",
    "RunQuery",
    "RunSummary",
    "StepEntry",
    "Store",
    "StoreUnavailable",
]
