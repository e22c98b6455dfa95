"""The run indexes in Redis: status changes with retention, pruning of expired runs, paged listing.

Indexes are sorted sets of run ids scored by creation time (ms): every run, per graph id,
per status, and per status and graph id. When a run finishes, its record, transcript and
path get an expiry of the retention and the run goes into `gr:idx:expiry`; when it leaves
a finished status (a resume) they are made persistent again. Redis expires the keys;
`prune` then takes the expired runs out of every index.
"""

from __future__ import annotations

import heapq
import itertools
import json
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from graphrunner.engine.snapshot import FINISHED
from graphrunner.store.keys import Shard
from graphrunner.store.query import STATUSES, Cursor, RunPage, RunQuery, RunSummary
from graphrunner.store.redis_conn import RedisConnection

T = TypeVar("T")
Call = Callable[[Callable[[], T]], T]
FINISHED_VALUES = frozenset(s.value for s in FINISHED)
SUMMARY_FIELDS = ("status", "step", "graph_id", "created_at", "updated_at")
MAX_BATCH = 2000
GONE = -2  # PTTL of a key that does not exist


def expiry_member(run_id: str, graph_id: str) -> str:
    """The member of `gr:idx:expiry` for a run: it still names the graph once the record is gone."""
    return json.dumps([run_id, graph_id])


class RunIndex:
    """Keeps the indexes of runs, expires finished ones after `retention_seconds`, lists pages."""

    def __init__(self, conn: RedisConnection, prune_script: Any, retention_seconds: int) -> None:
        self.conn = conn
        self.redis = conn.redis
        self.call: Call[Any] = conn._call
        self.keys = conn.keys
        self.prune_script = prune_script
        self.retention_seconds = retention_seconds

    def _run_keys(self, run_id: str) -> list[str]:
        return [self.keys.run(run_id), self.keys.steps(run_id), self.keys.path(run_id)]

    # -- status changes ------------------------------------------------------------------------

    def change(self, run_id: str, graph_id: str, old: str | None, new: str, score: int, now: int) -> None:
        """Index a run that is created (`old` None) or changes status, and set or lift its expiry."""

        def write() -> None:
            pipe = self.redis.pipeline(transaction=False)
            self.queue_change(pipe, run_id, graph_id, old, new, score, now)
            pipe.execute()

        self.call(write)

    def queue_change(
        self, pipe: Any, run_id: str, graph_id: str, old: str | None, new: str, score: int, now: int
    ) -> None:
        """Queue `change`'s commands on `pipe` (one round trip with whatever else it holds)."""
        shard = self.keys.shard(run_id)
        pipe.zadd(shard.index_all(), {run_id: score})
        pipe.zadd(shard.index_graph(graph_id), {run_id: score})
        if old and old != new:
            pipe.zrem(shard.index_status(old), run_id)
            pipe.zrem(shard.index_graph_status(graph_id, old), run_id)
        pipe.zadd(shard.index_status(new), {run_id: score})
        pipe.zadd(shard.index_graph_status(graph_id, new), {run_id: score})
        member = expiry_member(run_id, graph_id)
        if new in FINISHED_VALUES:
            for key in self._run_keys(run_id):
                pipe.expire(key, self.retention_seconds)
            pipe.zadd(shard.index_expiry(), {member: now + self.retention_seconds * 1000})
        elif old in FINISHED_VALUES:
            for key in self._run_keys(run_id):
                pipe.persist(key)
            pipe.zrem(shard.index_expiry(), member)

    # -- pruning -------------------------------------------------------------------------------

    def prune(self, now_ms: int | None, batch: int) -> int:
        """Take runs whose keys have expired by `now_ms` out of every index; how many were removed."""
        if batch < 1:
            raise ValueError(f"batch must be at least 1, got {batch}")
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return sum(self._prune_shard(shard, now, batch) for shard in self.keys.shards)

    def _prune_shard(self, shard: Shard, now: int, batch: int) -> int:
        removed, expiry = 0, shard.index_expiry()
        while True:
            members = self.call(lambda: self.redis.zrangebyscore(expiry, "-inf", now, 0, batch))
            if not members:
                return removed
            removed += self._prune_batch(shard, members, now)
            if len(members) < batch:
                return removed

    def _prune_batch(self, shard: Shard, members: Sequence[str], now: int) -> int:
        runs = [json.loads(m) for m in members]

        calls: list[tuple[list[str], list[Any]]] = [(self._run_keys(run_id), []) for run_id, _ in runs]
        ttls = [int(t) for t in self.call(lambda: self.conn.run_scripts(self.prune_script, calls))]
        gone: list[tuple[list[str], str]] = []
        kept: dict[str, int] = {}
        for run, member, ttl in zip(runs, members, ttls, strict=True):
            if ttl == GONE:
                gone.append((run, member))
            else:  # expires later than planned (clocks differ) or was resumed: look again later
                kept[member] = now + (ttl if ttl > 0 else self.retention_seconds * 1000)
        rows = self.call(lambda: self._unindex(shard, gone, kept))
        self._repair([run[0] for run, _ in gone], rows, now)
        return len(gone)

    def _unindex(self, shard: Shard, gone: list[tuple[list[str], str]], kept: dict[str, int]) -> list[Any]:
        """Remove gone runs from every index, reschedule kept ones; read the gone ids back after."""
        pipe = self.redis.pipeline(transaction=False)
        for (run_id, graph_id), member in gone:
            pipe.zrem(shard.index_all(), run_id)
            pipe.zrem(shard.index_graph(graph_id), run_id)
            for status in STATUSES:
                pipe.zrem(shard.index_status(status), run_id)
                pipe.zrem(shard.index_graph_status(graph_id, status), run_id)
            pipe.zrem(shard.index_expiry(), member)
        if kept:
            pipe.zadd(shard.index_expiry(), kept)
        for (run_id, _), _ in gone:
            pipe.hmget(self.keys.run(run_id), "graph_id", "status", "created_at")
        replies: list[Any] = pipe.execute()
        return replies[len(replies) - len(gone) :] if gone else []

    def _repair(self, run_ids: list[str], rows: list[Any], now: int) -> None:
        """Index again a run created under a pruned id while it was pruned (read after the removal)."""
        for run_id, (graph_id, status, created) in zip(run_ids, rows, strict=True):
            if status is not None:
                self.change(run_id, graph_id or "", None, status, int(created or 0), now)

    # -- listing -------------------------------------------------------------------------------

    def count(self, status: str) -> int:
        """The runs in `status`, over every shard."""

        def read() -> int:
            pipe = self.redis.pipeline(transaction=False)
            for shard in self.keys.shards:
                pipe.zcard(shard.index_status(status))
            return sum(int(n) for n in pipe.execute())

        return int(self.call(read))

    def page(self, query: RunQuery) -> RunPage:
        """One page of runs matching `query`, newest first, skipping runs whose record is gone."""
        return _Pager(self, query).run()

    def summaries(self, run_ids: Sequence[str]) -> list[RunSummary | None]:
        """The summaries of `run_ids` in one round trip (None where the record is gone)."""

        def read() -> list[Any]:
            pipe = self.redis.pipeline(transaction=False)
            for run_id in run_ids:
                pipe.hmget(self.keys.run(run_id), *SUMMARY_FIELDS)
            rows: list[Any] = pipe.execute()
            return rows

        rows = self.call(read) if run_ids else []
        return [_summary(r, row) for r, row in zip(run_ids, rows, strict=True)]


def index_of(shard: Shard, query: RunQuery) -> str:
    """The narrowest index of `shard` that holds every run `query` can match."""
    if query.graph_id and query.status:
        return shard.index_graph_status(query.graph_id, query.status)
    if query.graph_id:
        return shard.index_graph(query.graph_id)
    if query.status:
        return shard.index_status(query.status)
    return shard.index_all()


Entry = tuple[str, int]  # a run id and its creation time (ms)


class _ShardStream:
    """One shard's index entries, newest first at or below `top`, read in growing batches.

    The first batch pins `top` to the newest entry it read, so runs created meanwhile never
    shift the positions of later batches.
    """

    def __init__(self, index: RunIndex, key: str, top: int | str, floor: int | str, size: int) -> None:
        self.index, self.key, self.top, self.floor = index, key, top, floor
        self.pos, self.size, self.done = 0, size, False
        self.buffer: deque[Entry] = deque()

    def read(self, client: Any) -> Any:
        """Read the next batch with `client`, or queue its read on a pipeline (the first batches
        of all shards go in one round trip); `take` keeps what was read."""
        return client.zrevrangebyscore(
            self.key, self.top, self.floor, start=self.pos, num=self.size, withscores=True
        )

    def take(self, entries: list[tuple[str, float]]) -> None:
        """Keep a batch `read` returned."""
        if self.pos == 0 and entries and self.top == "+inf":
            self.top = int(entries[0][1])
        self.pos += len(entries)
        self.done = len(entries) < self.size
        self.buffer.extend((run_id, int(score)) for run_id, score in entries)
        self.size = min(2 * self.size, MAX_BATCH)

    def __iter__(self) -> Iterator[Entry]:
        while True:
            while self.buffer:
                yield self.buffer.popleft()
            if self.done:
                return
            self.take(self.index.call(lambda: self.read(self.index.redis)))


class _Pager:
    """Reads one page: every shard's index newest first, merged by creation time, then summaries.

    On one Redis there is one shard. On a Redis Cluster each of the N shards is read in
    batches (the first batches of all shards in one pipelined round trip; a shard is read
    again only when the merge has used its batch up), so a page of `limit` runs reads about
    N x (limit + 1) index entries and the summaries of the runs it returns. Entries created in
    the same millisecond are ordered by run id, descending, as in one sorted set.

    The cursor of the next page is the creation time of the last run returned and how many
    entries of that millisecond come up to it, so newer runs added meanwhile never shift a
    later page.
    """

    def __init__(self, index: RunIndex, query: RunQuery) -> None:
        self.index, self.query = index, query
        top, self.skip = query.start()
        self.top: int | str = "+inf" if top is None else top
        floor: int | str = "-inf" if query.since_ms is None else query.since_ms
        size = query.limit + 1 + self.skip
        self.streams = [
            _ShardStream(index, index_of(s, query), self.top, floor, size) for s in index.keys.shards
        ]
        self.found: list[RunSummary] = []
        self.last = (0, 0)  # the last run returned: its score, how many entries of that score up to it

    def run(self) -> RunPage:
        """Read until the page is full and one more match is seen, or every shard is read."""
        self.index.call(self._prime)
        merged = heapq.merge(*self.streams, key=lambda entry: (entry[1], entry[0]), reverse=True)
        previous, ties = -1, 0
        for _, score in itertools.islice(merged, self.skip):  # entries of `top` the last page returned
            previous, ties = (score, ties + 1) if score == previous else (score, 1)
        size = self.query.limit + 1
        while chunk := list(itertools.islice(merged, size)):
            summaries = self.index.summaries([run_id for run_id, _ in chunk])
            for (_, score), summary in zip(chunk, summaries, strict=True):
                previous, ties = (score, ties + 1) if score == previous else (score, 1)
                if summary is None or not self._matches(summary):
                    continue
                if len(self.found) == self.query.limit:
                    return self._done(more=True)
                self.found.append(summary)
                self.last = (score, ties)
            size = min(2 * size, MAX_BATCH)
        return self._done(more=False)

    def _prime(self) -> None:
        pipe = self.index.redis.pipeline(transaction=False)
        for stream in self.streams:
            stream.read(pipe)
        for stream, entries in zip(self.streams, pipe.execute(), strict=True):
            stream.take(entries)

    def _matches(self, summary: RunSummary) -> bool:
        """The record agrees with the index (a status index lags the commit by one pipeline)."""
        q = self.query
        status_ok = q.status is None or summary.status == q.status
        return status_ok and (q.graph_id is None or summary.graph_id == q.graph_id)

    def _done(self, more: bool) -> RunPage:
        if not more or not self.found:
            return RunPage(tuple(self.found))
        score, ties = self.last
        return RunPage(tuple(self.found), Cursor(score, ties).encode())


def _summary(run_id: str, row: Sequence[str | None]) -> RunSummary | None:
    status, step, graph_id, created, updated = row
    if status is None:
        return None
    return RunSummary(run_id, graph_id or "", status, int(step or 0), int(created or 0), int(updated or 0))
