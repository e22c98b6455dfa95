"""The parts of `MemoryStore` that are not about runs: the result cache, concurrency keys, dead
letters and the sweeper's lock (what `redis_aux` holds for `RedisStore`)."""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections import defaultdict
from typing import Any

from graphrunner.store.base import DeadLetter


class MemoryAux:
    """The result cache, concurrency keys, dead letters and the sweeper's lock and log, in this process."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._cache: dict[str, tuple[float, str]] = {}
        self._holders: dict[str, str] = {}
        self._waiting: dict[str, list[str]] = defaultdict(list)
        self._dead: list[DeadLetter] = []
        self._dead_total = 0
        self._sweep_lock_until = 0.0
        self._last_sweep: int | None = None
        self._signing_key = b""

    # -- dead letters ----------------------------------------------------------------------------------

    def dead_letter(self, letter: DeadLetter, keep: int = 10_000) -> int:
        """Keep `letter` (newest first, at most `keep`); how many were refused in all."""
        with self._lock:
            self._dead.insert(0, letter)
            del self._dead[keep:]
            self._dead_total += 1
            return self._dead_total

    def dead_letters(self, count: int = 20) -> list[DeadLetter]:
        """The newest `count` dead letters."""
        with self._lock:
            return list(self._dead[: max(0, count)])

    def dead_total(self) -> int:
        """How many messages workers have refused, ever."""
        return self._dead_total

    # -- the cache and concurrency keys ----------------------------------------------------------------

    def cache_get(self, digest: str) -> tuple[bool, Any]:
        """(hit, value) for a cached node result."""
        with self._lock:
            entry = self._cache.get(digest)
        if entry is None or entry[0] < time.time():
            return False, None
        return True, json.loads(entry[1])

    def cache_set(self, digest: str, value: Any, ttl: int) -> None:
        """Cache a node result for `ttl` seconds."""
        with self._lock:
            self._cache[digest] = (time.time() + max(1, ttl), json.dumps(value))

    def acquire_key(self, key: str, run_id: str, queue: bool) -> tuple[str, str | None]:
        """Take `key` for `run_id`: ("acquired", None), ("queued", holder) or ("refused", holder)."""
        with self._lock:
            holder = self._holders.get(key)
            if holder is None or holder == run_id:
                self._holders[key] = run_id
                return "acquired", None
            if not queue:
                return "refused", holder
            if run_id not in self._waiting[key]:
                self._waiting[key].append(run_id)
            return "queued", holder

    def release_key(self, key: str, run_id: str) -> str | None:
        """Hand `key` on from `run_id` (if it holds it): the next waiting run's id, or None."""
        with self._lock:
            if self._holders.get(key) != run_id:
                return None
            if self._waiting[key]:
                self._holders[key] = self._waiting[key].pop(0)
                return self._holders[key]
            del self._holders[key]
            return None

    def key_holder(self, key: str) -> str | None:
        """The run holding `key`, if any."""
        with self._lock:
            return self._holders.get(key)

    def unqueue(self, key: str, run_id: str) -> None:
        """Take a waiting run off `key`'s queue."""
        with self._lock:
            self._waiting[key] = [r for r in self._waiting[key] if r != run_id]

    # -- the signing key -------------------------------------------------------------------------------

    def signing_key(self) -> bytes:
        """The cluster's signing key (one per store, made when first asked for)."""
        with self._lock:
            if not self._signing_key:
                self._signing_key = secrets.token_hex(32).encode()
            return self._signing_key

    # -- the sweep lock --------------------------------------------------------------------------------

    def lock_sweep(self, seconds: int) -> bool:
        """Take the sweeper's lock for `seconds` (False when another pass holds it)."""
        with self._lock:
            if self._sweep_lock_until > time.monotonic():
                return False
            self._sweep_lock_until = time.monotonic() + max(1, seconds)
            return True

    def unlock_sweep(self) -> None:
        """Release the sweeper's lock."""
        self._sweep_lock_until = 0.0

    def swept(self, at_ms: int) -> None:
        """Record that a sweeper pass ended at `at_ms`."""
        self._last_sweep = at_ms

    def last_sweep(self) -> int | None:
        """When (ms) the last sweeper pass ended; None if none has."""
        return self._last_sweep
