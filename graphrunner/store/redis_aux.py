"""The parts of `RedisStore` around runs: foreach items, the result cache, concurrency keys,
liveness (heartbeats, progress deadlines, the sweeper's lock) and dead letters."""

from __future__ import annotations

import heapq
import itertools
import json
import secrets
from collections.abc import Iterator, Sequence
from typing import Any

from graphrunner.store import keys
from graphrunner.store.base import Ack, DeadLetter, Saved, ack_parts, now_ms
from graphrunner.store.redis_conn import RedisConnection

ITEMS_TTL = 7 * 24 * 3600  # item results outlive a stalled foreach, then go
ITEMS_BATCH = 1000


class ItemsMixin(RedisConnection):
    """Foreach item results: one hash per foreach, the first record of an index wins."""

    _save_item: Any
    direct: bool  # this Redis is the broker (see `RedisStore`)

    def save_item(
        self, run_id: str, tag: str, index: int, record: dict[str, Any], progress: float | None = None
    ) -> bool:
        """Record one foreach item's result; the first record of an index wins (idempotent)."""
        return self.save_items(run_id, tag, [(index, record)], progress).kept == 1

    def save_items(
        self,
        run_id: str,
        tag: str,
        records: Sequence[tuple[int, dict[str, Any]]],
        progress: float | None = None,
        upto: int = 0,
        ack: Ack | None = None,
    ) -> Saved:
        """Record foreach items' results in one write; the first record of an index wins.

        Items are progress: the run's heartbeat is set, and its progress deadline pushed on to
        `progress` (epoch s) when given. `completed`: one of these records was the `upto`-th of
        the foreach (the last one its chunk in flight waited for). When this Redis is the broker
        (`direct`), the same write acknowledges the item message (`ack`).
        """
        ack_keys, ack_tag = ack_parts(ack if self.direct else None)
        item_keys = [self.keys.items(run_id, tag), *self._beat_keys(run_id), *ack_keys]
        args: list[Any] = [ITEMS_TTL, now_ms(), run_id, int((progress or 0) * 1000), upto, ack_tag]
        for index, record in records:
            args += [index, json.dumps(record)]
        kept, completed = self._call(lambda: self._save_item(keys=item_keys, args=args))
        return Saved(int(kept), bool(completed), acked=bool(ack_tag))

    def count_items(self, run_id: str, tag: str) -> int:
        """How many distinct items of a foreach have a result."""
        return int(self._call(lambda: self.redis.hlen(self.keys.items(run_id, tag))))

    def item_records(self, run_id: str, tag: str, total: int) -> Iterator[dict[str, Any] | None]:
        """The results of items 0..total-1 in item order (None where missing), read a page of
        `ITEMS_BATCH` at a time as they are asked for and decoded one at a time: a reader folding
        them never holds more than a page of them, undecoded."""
        for page in self._item_range(run_id, tag, 0, total):
            for _, raw in page:
                yield json.loads(raw) if raw else None

    def missing_items(self, run_id: str, tag: str, start: int, stop: int) -> list[int]:
        """The indexes in `[start, stop)` with no recorded result."""
        pages = self._item_range(run_id, tag, start, stop)
        return [index for page in pages for index, raw in page if raw is None]

    def _item_range(
        self, run_id: str, tag: str, start: int, stop: int
    ) -> Iterator[list[tuple[int, str | None]]]:
        """Pages of (index, raw record or None) for items `[start, stop)`, one HMGET per
        `ITEMS_BATCH`, read as they are asked for."""
        key = self.keys.items(run_id, tag)
        for first in range(start, stop, ITEMS_BATCH):
            indexes = range(first, min(stop, first + ITEMS_BATCH))
            fields = [str(i) for i in indexes]
            raw = self._call(lambda f=fields: self.redis.hmget(key, f))  # type: ignore[misc]
            yield list(zip(indexes, raw, strict=True))

    def drop_items(self, run_id: str, tag: str) -> None:
        """Delete a finished foreach's item results."""
        self._call(lambda: self.redis.delete(self.keys.items(run_id, tag)))


class CacheMixin(RedisConnection):
    """Cached node results under the digest of DESIGN §2.9's cache key."""

    def cache_get(self, digest: str) -> tuple[bool, Any]:
        """(hit, value) for a cached node result."""
        raw = self._call(lambda: self.redis.get(keys.cache(digest)))
        return (True, json.loads(raw)) if raw is not None else (False, None)

    def cache_set(self, digest: str, value: Any, ttl: int) -> None:
        """Cache a node result for `ttl` seconds."""
        self._call(lambda: self.redis.set(keys.cache(digest), json.dumps(value), ex=max(1, ttl)))


class KeysMixin(RedisConnection):
    """Concurrency keys: the holder, and the runs queued behind it."""

    _acquire: Any
    _release: Any

    def acquire_key(self, key: str, run_id: str, queue: bool) -> tuple[str, str | None]:
        """Take `key` for `run_id`: ("acquired", None), ("queued", holder) or ("refused", holder)."""
        mode, held = "queue" if queue else "refuse", [keys.concurrency(key), keys.concurrency_queue(key)]
        reply = self._call(lambda: self._acquire(keys=held, args=[run_id, mode]))
        return str(reply[0]), (str(reply[1]) if len(reply) > 1 else None)

    def release_key(self, key: str, run_id: str) -> str | None:
        """Hand `key` on from `run_id` (if it holds it): the next waiting run's id, or None."""
        held = [keys.concurrency(key), keys.concurrency_queue(key)]
        reply = self._call(lambda: self._release(keys=held, args=[run_id]))
        return str(reply) if reply else None

    def key_holder(self, key: str) -> str | None:
        """The run holding `key`, if any."""
        holder = self._call(lambda: self.redis.get(keys.concurrency(key)))
        return str(holder) if holder else None

    def unqueue(self, key: str, run_id: str) -> None:
        """Take a waiting run off `key`'s queue (it was cancelled)."""
        self._call(lambda: self.redis.lrem(keys.concurrency_queue(key), 0, run_id))


class LivenessMixin(RedisConnection):
    """Heartbeats, the sweeper's progress deadlines, and its lock."""

    _beat: Any

    def beat(self, run_ids: Sequence[str], progress: float | None = None) -> None:
        """Record a heartbeat (now) on runs in flight; push their progress deadline to `progress`."""
        if not run_ids:
            return
        stamp = now_ms()
        deadline = int((progress or 0) * 1000) or stamp

        calls = [(self._beat_keys(run_id), [stamp, run_id, deadline]) for run_id in run_ids]
        self._call(lambda: self.run_scripts(self._beat, calls))

    def stalled(self, now: float, limit: int = 500) -> list[str]:
        """Running runs whose progress deadline has passed by `now` (epoch s), earliest first."""
        top = int(now * 1000)

        def read() -> list[list[tuple[str, float]]]:
            pipe = self.redis.pipeline(transaction=False)
            for shard in self.keys.shards:
                pipe.zrange(shard.progress(), "-inf", top, byscore=True, offset=0, num=limit, withscores=True)
            found: list[list[tuple[str, float]]] = pipe.execute()
            return found

        merged = heapq.merge(*self._call(read), key=lambda entry: (entry[1], entry[0]))  # as one sorted set
        return [run_id for run_id, _ in itertools.islice(merged, limit)]

    def touch(self, run_id: str, progress: float) -> None:
        """Set the run's progress deadline to `progress` (epoch s), if it is watched."""
        deadline = int(progress * 1000)
        self._call(lambda: self.redis.zadd(self.keys.shard(run_id).progress(), {run_id: deadline}, xx=True))

    def activity(self, run_ids: Sequence[str]) -> list[dict[str, str]]:
        """Per run: status, step, phase, updated_at and heartbeat (ms), in one round trip."""
        fields = ("status", "step", "phase", "updated_at", "heartbeat")

        def read() -> list[Any]:
            pipe = self.redis.pipeline(transaction=False)
            for run_id in run_ids:
                pipe.hmget(self.keys.run(run_id), *fields)
            result: list[Any] = pipe.execute()
            return result

        rows = self._call(read) if run_ids else []
        return [{k: v for k, v in zip(fields, row, strict=True) if v is not None} for row in rows]

    def signing_key(self) -> bytes:
        """The cluster's signing key: the one stored, else a new random one stored now (first wins)."""
        fresh = secrets.token_hex(32)
        self._call(lambda: self.redis.set(keys.signing_key(), fresh, nx=True))
        stored = self._call(lambda: self.redis.get(keys.signing_key()))
        return str(stored or fresh).encode()

    def lock_sweep(self, seconds: int) -> bool:
        """Take the sweeper's lock for `seconds` (False when another pass holds it)."""
        ttl = max(1, seconds)
        return bool(self._call(lambda: self.redis.set(keys.sweep_lock(), now_ms(), nx=True, ex=ttl)))

    def unlock_sweep(self) -> None:
        """Release the sweeper's lock."""
        self._call(lambda: self.redis.delete(keys.sweep_lock()))

    def swept(self, at_ms: int) -> None:
        """Record that a sweeper pass ended at `at_ms`."""
        self._call(lambda: self.redis.set(keys.last_sweep(), at_ms))

    def last_sweep(self) -> int | None:
        """When (ms) the last sweeper pass ended; None if none has."""
        raw = self._call(lambda: self.redis.get(keys.last_sweep()))
        return int(raw) if raw else None


class DeadLettersMixin(RedisConnection):
    """Messages workers refused: counted, the newest `keep` kept for `graphrunner queues --dead`."""

    def dead_letter(self, letter: DeadLetter, keep: int = 10_000) -> int:
        """Keep `letter` (newest first, at most `keep`); returns how many were refused in all."""
        entry = json.dumps(letter.__dict__, default=str)

        def write() -> int:
            pipe = self.redis.pipeline(transaction=True)
            pipe.lpush(self.keys.dead_letters(), entry)
            pipe.ltrim(self.keys.dead_letters(), 0, keep - 1)
            pipe.incr(self.keys.dead_count())
            return int(pipe.execute()[2])

        return self._call(write)

    def dead_letters(self, count: int = 20) -> list[DeadLetter]:
        """The newest `count` dead letters."""
        if count < 1:
            return []  # LRANGE 0 -1 would read them all
        raw = self._call(lambda: self.redis.lrange(self.keys.dead_letters(), 0, count - 1))
        return [DeadLetter(**json.loads(r)) for r in raw]

    def dead_total(self) -> int:
        """How many messages workers have refused, ever."""
        return int(self._call(lambda: self.redis.get(self.keys.dead_count())) or 0)
