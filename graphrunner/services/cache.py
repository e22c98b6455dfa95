"""The node result cache of DESIGN §2.9: keys, and where cached results live."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any, Protocol

from graphrunner.engine import ActionCall

DEFAULT_TTL = 24 * 3600


class ResultCache(Protocol):
    """Where cached node results are kept: Redis on a cluster, memory in-process."""

    def cache_get(self, digest: str) -> tuple[bool, Any]: ...

    def cache_set(self, digest: str, value: Any, ttl: int) -> None: ...


def cache_key(graph_hash: str, call: ActionCall, tool_version: str) -> str:
    """The digest of graph content hash, node, interpolated action and tool version."""
    body = json.dumps(
        [graph_hash, call.node, call.tool, call.params, tool_version], sort_keys=True, default=str
    )
    return hashlib.sha256(body.encode()).hexdigest()


@dataclass(frozen=True)
class CacheSlot:
    """Where one dispatch's result is looked up and stored."""

    cache: ResultCache
    digest: str
    ttl: int = DEFAULT_TTL


class MemoryCache:
    """A result cache in this process, for in-process runs (entries expire like Redis keys)."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[float, Any]] = {}

    def cache_get(self, digest: str) -> tuple[bool, Any]:
        """(hit, value); an expired entry is a miss."""
        entry = self._entries.get(digest)
        if entry is None or entry[0] < time.monotonic():
            self._entries.pop(digest, None)
            return False, None
        return True, json.loads(entry[1])

    def cache_set(self, digest: str, value: Any, ttl: int) -> None:
        """Keep a copy of `value` for `ttl` seconds."""
        self._entries[digest] = (time.monotonic() + ttl, json.dumps(value))
