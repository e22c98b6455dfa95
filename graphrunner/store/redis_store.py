"""`RedisStore`: runs, state, transcripts, indexes and graph definitions in Redis.

Per step a worker makes two store round trips: `load_run` (one HMGET) and
`commit` (one EVALSHA, fenced on step, phase and status). Index updates happen only when a run's status
changes. Connection errors are retried with backoff, then raised as `StoreUnavailable`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any, TypeVar

import redis
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from graphrunner.engine import RunSnapshot
from graphrunner.errors import GraphrunnerError
from graphrunner.store import keys
from graphrunner.store.base import Committed, Created, Fence, RunSummary, StepEntry
from graphrunner.store.query import RunPage, RunQuery
from graphrunner.store.redis_index import RunIndex

T = TypeVar("T")
CONNECTION_ERRORS = (redis.ConnectionError, redis.TimeoutError)
ITEMS_TTL = 7 * 24 * 3600  # item results outlive a stalled foreach, then go
ITEMS_BATCH = 1000
RETENTION_SECONDS = 7 * 24 * 3600  # finished runs expire after this (GRAPHRUNNER_RETENTION)


class StoreUnavailable(GraphrunnerError):
    """Redis could not be reached within the retry budget."""


def _script(name: str) -> str:
    return resources.files("graphrunner.store").joinpath("lua", name).read_text(encoding="utf-8")


def now_ms() -> int:
    """Milliseconds since the epoch."""
    return int(time.time() * 1000)


class RedisStore:
    """The Redis implementation of `Store`."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        retry_seconds: float = 30.0,
        url: str = "",
        retention_seconds: int = RETENTION_SECONDS,
    ) -> None:
        # redis-py types replies as bytes | str even with decode_responses=True: treat them as Any here
        self.redis: Any = client
        self.url = url
        self.retry_seconds = retry_seconds
        self._create = client.register_script(_script("create_run.lua"))
        self._commit = client.register_script(_script("commit_step.lua"))
        self._beat = client.register_script(_script("beat.lua"))
        self._acquire = client.register_script(_script("acquire_key.lua"))
        self._release = client.register_script(_script("release_key.lua"))
        prune = client.register_script(_script("prune_run.lua"))
        self.index = RunIndex(client, self._call, prune, retention_seconds)

    @classmethod
    def from_url(
        cls, url: str, *, retry_seconds: float = 30.0, retention_seconds: int = RETENTION_SECONDS
    ) -> RedisStore:
        """A store for `redis://...`; sockets time out so a dead server is noticed quickly."""
        client = redis.Redis.from_url(
            url, decode_responses=True, socket_connect_timeout=2, socket_timeout=15, health_check_interval=30
        )
        return cls(client, retry_seconds=retry_seconds, url=url, retention_seconds=retention_seconds)

    def _call(self, fn: Callable[[], T]) -> T:
        """Run one Redis operation; after a connection error, retry it with exponential backoff."""
        try:
            return fn()
        except CONNECTION_ERRORS:
            return self._retry(fn)

    def _retry(self, fn: Callable[[], T]) -> T:
        retrying = Retrying(
            retry=retry_if_exception_type(CONNECTION_ERRORS),
            wait=wait_exponential(multiplier=0.1, max=2),
            stop=stop_after_delay(self.retry_seconds),
            reraise=True,
        )
        try:
            return retrying(fn)
        except CONNECTION_ERRORS as exc:
            where = f" at {self.url}" if self.url else ""
            raise StoreUnavailable(f"cannot reach Redis{where}: {exc}") from exc

    def ping(self) -> None:
        """Raise `StoreUnavailable` unless Redis answers."""
        self._call(self.redis.ping)

    def save_graph(self, content_hash: str, definition: dict[str, Any]) -> None:
        """Store a graph definition once per content hash."""
        self._call(lambda: self.redis.set(keys.graph(content_hash), json.dumps(definition), nx=True))

    def load_graph(self, content_hash: str) -> dict[str, Any] | None:
        """The stored definition for a content hash."""
        raw = self._call(lambda: self.redis.get(keys.graph(content_hash)))
        return json.loads(raw) if raw else None

    def create_run(self, snap: RunSnapshot, fingerprint: str) -> Created:
        """Create the run unless its id exists; index it when created."""
        created_at = now_ms()
        args = [
            fingerprint,
            snap.status.value,
            snap.step,
            _meta(snap),
            json.dumps(snap.state),
            snap.graph_id,
            created_at,
        ]
        reply = self._call(
            lambda: self._create(keys=[keys.run(snap.run_id), keys.steps(snap.run_id)], args=args)
        )
        if int(reply[0]) == 0:
            return Created(False, str(reply[1]))
        self._index(snap.run_id, snap.graph_id, None, snap.status.value, created_at)
        return Created(True)

    def load_run(self, run_id: str, with_path: bool = False) -> RunSnapshot | None:
        """The run's snapshot with its state (and its path when asked), or None for an unknown run."""
        meta, state = self._call(lambda: self.redis.hmget(keys.run(run_id), "snapshot", "state"))
        if meta is None:
            return None
        walked = self._call(lambda: self.redis.lrange(keys.path(run_id), 0, -1)) if with_path else ()
        data = {**json.loads(meta), "state": json.loads(state or "{}"), "path": walked}
        return RunSnapshot.model_validate(data)

    def commit(
        self,
        fence: Fence,
        snap: RunSnapshot,
        records: Sequence[dict[str, Any]] = (),
        walked: Sequence[str] = (),
    ) -> Committed:
        """Write the new snapshot, transcript records and the nodes `walked`, if the run is at `fence`.

        The snapshot is stored without its path: the path grows with every step, so it is kept
        in a list the commit appends to, and read back only for results.
        """
        args = [
            fence.step,
            fence.phase,
            fence.status,
            snap.step,
            snap.phase,
            snap.status.value,
            _meta(snap),
            json.dumps(snap.state),
            now_ms(),
            len(records),
            *(json.dumps(r, default=str) for r in records),
            *walked,
        ]
        run_keys = [keys.run(snap.run_id), keys.steps(snap.run_id), keys.path(snap.run_id)]
        reply = self._call(lambda: self._commit(keys=run_keys, args=args))
        if int(reply[0]) == 0:
            step = int(reply[1]) if reply[1] not in ("", None) else None
            return Committed(False, step, str(reply[2]) or None)
        if snap.status.value != fence.status:
            self._restatus(snap.run_id, fence.status, snap.status.value)
        return Committed(True)

    def mark_dispatched(self, run_id: str, phase: int) -> None:
        """Record that what the suspension at `phase` waits for has been sent (see `dispatched`)."""
        self._call(lambda: self.redis.hset(keys.run(run_id), "dispatched", phase))

    def dispatched(self, run_id: str) -> int:
        """The last phase whose work was marked sent (-1 if none)."""
        raw = self._call(lambda: self.redis.hget(keys.run(run_id), "dispatched"))
        return int(raw) if raw not in (None, "") else -1

    # -- liveness: heartbeats, redeliveries, what the sweeper reads -----------------------------

    def beat(self, run_ids: Sequence[str]) -> None:
        """Record a heartbeat (now) on runs whose steps or items are in flight."""
        if not run_ids:
            return
        stamp = now_ms()

        def write() -> None:
            pipe = self.redis.pipeline(transaction=False)
            for run_id in run_ids:
                self._beat(keys=[keys.run(run_id)], args=[stamp], client=pipe)
            pipe.execute()

        self._call(write)

    def status_of(self, run_id: str) -> str | None:
        """The run's status (None for an unknown run): one HGET, for item tasks."""
        status = self._call(lambda: self.redis.hget(keys.run(run_id), "status"))
        return str(status) if status else None

    def count_redelivery(self, run_id: str, what: str) -> int:
        """Count one more redelivery of `what` (a step and phase, or an item) of a run."""
        return int(self._call(lambda: self.redis.hincrby(keys.run(run_id), f"redeliveries:{what}", 1)))

    def activity(self, run_ids: Sequence[str]) -> list[dict[str, str]]:
        """Per run: status, step, phase, updated_at and heartbeat (ms), in one round trip."""
        fields = ("status", "step", "phase", "updated_at", "heartbeat")

        def read() -> list[Any]:
            pipe = self.redis.pipeline(transaction=False)
            for run_id in run_ids:
                pipe.hmget(keys.run(run_id), *fields)
            result: list[Any] = pipe.execute()
            return result

        rows = self._call(read) if run_ids else []
        return [{k: v for k, v in zip(fields, row, strict=True) if v is not None} for row in rows]

    def running_ids(self) -> list[str]:
        """Every run id in status running (the sweeper's candidates), oldest first."""
        found: list[str] = self._call(lambda: self.redis.zrange(keys.index_status("running"), 0, -1))
        return found

    def last_record(self, run_id: str) -> dict[str, Any]:
        """The run's last transcript record ({} when it has none)."""
        entries = self._call(lambda: self.redis.xrevrange(keys.steps(run_id), count=1))
        return _entry(*entries[0]).record if entries else {}

    def note(self, run_id: str, record: dict[str, Any]) -> None:
        """Append a transcript record that commits nothing (the sweeper's repairs)."""
        self._call(lambda: self.redis.xadd(keys.steps(run_id), {"r": json.dumps(record, default=str)}))

    def lock_sweep(self, seconds: int) -> bool:
        """Take the sweeper's lock for `seconds` (False when another pass holds it)."""
        ttl = max(1, seconds)
        return bool(self._call(lambda: self.redis.set(keys.sweep_lock(), now_ms(), nx=True, ex=ttl)))

    def unlock_sweep(self) -> None:
        """Release the sweeper's lock."""
        self._call(lambda: self.redis.delete(keys.sweep_lock()))

    # -- concurrency keys ------------------------------------------------------------------------

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

    def save_item(self, run_id: str, tag: str, index: int, record: dict[str, Any]) -> bool:
        """Record one foreach item's result; the first record of an index wins (idempotent)."""
        key = keys.items(run_id, tag)

        def write() -> bool:
            pipe = self.redis.pipeline(transaction=False)
            pipe.hsetnx(key, str(index), json.dumps(record))
            pipe.expire(key, ITEMS_TTL)
            self._beat(keys=[keys.run(run_id)], args=[now_ms()], client=pipe)  # items are progress
            return bool(pipe.execute()[0])

        return self._call(write)

    def count_items(self, run_id: str, tag: str) -> int:
        """How many distinct items of a foreach have a result."""
        return int(self._call(lambda: self.redis.hlen(keys.items(run_id, tag))))

    def load_items(self, run_id: str, tag: str, total: int) -> list[dict[str, Any] | None]:
        """The results of items 0..total-1 in item order (None where missing), read in batches."""
        return [json.loads(raw) if raw else None for _, raw in self._item_range(run_id, tag, 0, total)]

    def missing_items(self, run_id: str, tag: str, start: int, stop: int) -> list[int]:
        """The indexes in `[start, stop)` with no recorded result."""
        return [index for index, raw in self._item_range(run_id, tag, start, stop) if raw is None]

    def _item_range(self, run_id: str, tag: str, start: int, stop: int) -> list[tuple[int, str | None]]:
        """(index, raw record or None) for items `[start, stop)`, one HMGET per `ITEMS_BATCH`."""
        key, found = keys.items(run_id, tag), []
        for first in range(start, stop, ITEMS_BATCH):
            indexes = range(first, min(stop, first + ITEMS_BATCH))
            fields = [str(i) for i in indexes]
            raw = self._call(lambda f=fields: self.redis.hmget(key, f))  # type: ignore[misc]
            found += list(zip(indexes, raw, strict=True))
        return found

    def drop_items(self, run_id: str, tag: str) -> None:
        """Delete a finished foreach's item results."""
        self._call(lambda: self.redis.delete(keys.items(run_id, tag)))

    def cache_get(self, digest: str) -> tuple[bool, Any]:
        """(hit, value) for a cached node result."""
        raw = self._call(lambda: self.redis.get(keys.cache(digest)))
        return (True, json.loads(raw)) if raw is not None else (False, None)

    def cache_set(self, digest: str, value: Any, ttl: int) -> None:
        """Cache a node result for `ttl` seconds."""
        self._call(lambda: self.redis.set(keys.cache(digest), json.dumps(value), ex=max(1, ttl)))

    def _index(self, run_id: str, graph_id: str, old: str | None, new: str, score: int) -> None:
        self.index.change(run_id, graph_id, old, new, score, now_ms())

    def _restatus(self, run_id: str, old: str, new: str) -> None:
        """Re-index a run whose status changed from `old` to `new`, in one pipeline.

        A run that becomes finished expires after the retention; one that leaves a finished status
        (resumed) is kept again. Every status change outside `create_run` goes through here.
        """
        created, graph_id = self._call(lambda: self.redis.hmget(keys.run(run_id), "created_at", "graph_id"))
        self._index(run_id, graph_id or "", old, new, int(created or 0))

    def prune_expired(self, now_ms: int | None = None, batch: int = 1000) -> int:
        """Take runs whose keys the retention expired out of every index; how many were pruned.

        Runs whose record is still there (alive, resumed, expiring later) are left alone;
        `now_ms` (epoch ms, default now) bounds the expiry times looked at, `batch` each read.
        """
        return self.index.prune(now_ms, batch)

    def steps(self, run_id: str, after: str = "-", count: int | None = None) -> list[StepEntry]:
        """Transcript records after stream id `after` (exclusive; `-` for all)."""
        start = "-" if after == "-" else f"({after}"
        entries = self._call(lambda: self.redis.xrange(keys.steps(run_id), min=start, count=count))
        return [_entry(i, fields) for i, fields in entries]

    def wait_steps(self, run_id: str, after: str, block_ms: int) -> list[StepEntry]:
        """Block up to `block_ms` for transcript records after `after` (`0` for all)."""
        reply = self._call(lambda: self.redis.xread({keys.steps(run_id): after}, block=block_ms))
        return [_entry(i, fields) for _, entries in (reply or []) for i, fields in entries]

    def run_fields(self, run_id: str) -> dict[str, str]:
        """The raw record fields of a run (status, step, graph_id, timestamps)."""
        fields = ("status", "step", "graph_id", "created_at", "updated_at", "fingerprint")
        values = self._call(lambda: self.redis.hmget(keys.run(run_id), *fields))
        return {k: v for k, v in zip(fields, values, strict=True) if v is not None}

    def list_runs(
        self, graph_id: str | None = None, status: str | None = None, limit: int = 50, offset: int = 0
    ) -> Sequence[RunSummary]:
        """Runs newest first, filtered by graph id and/or status."""
        return list(self.page_runs(RunQuery.build(graph_id, status, limit, offset)).runs)

    def page_runs(self, query: RunQuery) -> RunPage:
        """A page of runs matching `query`, newest first, and the cursor of the next page."""
        return self.index.page(query)


def _meta(snap: RunSnapshot) -> str:
    return snap.model_dump_json(exclude={"state", "path"})


def _entry(stream_id: str, fields: dict[str, str]) -> StepEntry:
    return StepEntry(stream_id, json.loads(fields.get("r", "{}")))
