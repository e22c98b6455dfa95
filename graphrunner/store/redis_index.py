"""The run indexes in Redis: status changes with retention, pruning of expired runs, paged listing.

Indexes are sorted sets of run ids scored by creation time (ms): every run, per graph id,
per status, and per status and graph id. When a run finishes, its record, transcript and
path get an expiry of the retention and the run goes into `gr:idx:expiry`; when it leaves
a finished status (a resume) they are made persistent again. Redis expires the keys;
`prune` then takes the expired runs out of every index.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from graphrunner.engine.snapshot import FINISHED
from graphrunner.store import keys
from graphrunner.store.query import STATUSES, Cursor, RunPage, RunQuery, RunSummary

T = TypeVar("T")
Call = Callable[[Callable[[], T]], T]
FINISHED_VALUES = frozenset(s.value for s in FINISHED)
SUMMARY_FIELDS = ("status", "step", "graph_id", "created_at", "updated_at")
MAX_BATCH = 2000
GONE = -2  # PTTL of a key that does not exist


def expiry_member(run_id: str, graph_id: str) -> str:
    """The member of `gr:idx:expiry` for a run: it still names the graph once the record is gone."""
    return json.dumps([run_id, graph_id])


def _run_keys(run_id: str) -> list[str]:
    return [keys.run(run_id), keys.steps(run_id), keys.path(run_id)]


class RunIndex:
    """Keeps the indexes of runs, expires finished ones after `retention_seconds`, lists pages."""

    def __init__(self, client: Any, call: Call[Any], prune_script: Any, retention_seconds: int) -> None:
        self.redis = client
        self.call = call
        self.prune_script = prune_script
        self.retention_seconds = retention_seconds

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
        pipe.zadd(keys.index_all(), {run_id: score})
        pipe.zadd(keys.index_graph(graph_id), {run_id: score})
        if old and old != new:
            pipe.zrem(keys.index_status(old), run_id)
            pipe.zrem(keys.index_graph_status(graph_id, old), run_id)
        pipe.zadd(keys.index_status(new), {run_id: score})
        pipe.zadd(keys.index_graph_status(graph_id, new), {run_id: score})
        member = expiry_member(run_id, graph_id)
        if new in FINISHED_VALUES:
            for key in _run_keys(run_id):
                pipe.expire(key, self.retention_seconds)
            pipe.zadd(keys.index_expiry(), {member: now + self.retention_seconds * 1000})
        elif old in FINISHED_VALUES:
            for key in _run_keys(run_id):
                pipe.persist(key)
            pipe.zrem(keys.index_expiry(), member)

    # -- pruning -------------------------------------------------------------------------------

    def prune(self, now_ms: int | None, batch: int) -> int:
        """Take runs whose keys have expired by `now_ms` out of every index; how many were removed."""
        if batch < 1:
            raise ValueError(f"batch must be at least 1, got {batch}")
        now, removed = int(time.time() * 1000) if now_ms is None else now_ms, 0
        while True:
            members = self.call(lambda: self.redis.zrangebyscore(keys.index_expiry(), "-inf", now, 0, batch))
            if not members:
                return removed
            removed += self._prune_batch(members, now)
            if len(members) < batch:
                return removed

    def _prune_batch(self, members: Sequence[str], now: int) -> int:
        runs = [json.loads(m) for m in members]

        def check() -> list[int]:
            pipe = self.redis.pipeline(transaction=False)
            for run_id, _ in runs:
                self.prune_script(keys=_run_keys(run_id), client=pipe)
            return [int(t) for t in pipe.execute()]

        ttls = self.call(check)
        gone: list[tuple[list[str], str]] = []
        kept: dict[str, int] = {}
        for run, member, ttl in zip(runs, members, ttls, strict=True):
            if ttl == GONE:
                gone.append((run, member))
            else:  # expires later than planned (clocks differ) or was resumed: look again later
                kept[member] = now + (ttl if ttl > 0 else self.retention_seconds * 1000)
        rows = self.call(lambda: self._unindex(gone, kept))
        self._repair([run[0] for run, _ in gone], rows, now)
        return len(gone)

    def _unindex(self, gone: list[tuple[list[str], str]], kept: dict[str, int]) -> list[Any]:
        """Remove gone runs from every index, reschedule kept ones; read the gone ids back after."""
        pipe = self.redis.pipeline(transaction=False)
        for (run_id, graph_id), member in gone:
            pipe.zrem(keys.index_all(), run_id)
            pipe.zrem(keys.index_graph(graph_id), run_id)
            for status in STATUSES:
                pipe.zrem(keys.index_status(status), run_id)
                pipe.zrem(keys.index_graph_status(graph_id, status), run_id)
            pipe.zrem(keys.index_expiry(), member)
        if kept:
            pipe.zadd(keys.index_expiry(), kept)
        for (run_id, _), _ in gone:
            pipe.hmget(keys.run(run_id), "graph_id", "status", "created_at")
        replies: list[Any] = pipe.execute()
        return replies[len(replies) - len(gone) :] if gone else []

    def _repair(self, run_ids: list[str], rows: list[Any], now: int) -> None:
        """Index again a run created under a pruned id while it was pruned (read after the removal)."""
        for run_id, (graph_id, status, created) in zip(run_ids, rows, strict=True):
            if status is not None:
                self.change(run_id, graph_id or "", None, status, int(created or 0), now)

    # -- listing -------------------------------------------------------------------------------

    def page(self, query: RunQuery) -> RunPage:
        """One page of runs matching `query`, newest first, skipping runs whose record is gone."""
        return _Pager(self, query).run()

    def summaries(self, run_ids: Sequence[str]) -> list[RunSummary | None]:
        """The summaries of `run_ids` in one round trip (None where the record is gone)."""

        def read() -> list[Any]:
            pipe = self.redis.pipeline(transaction=False)
            for run_id in run_ids:
                pipe.hmget(keys.run(run_id), *SUMMARY_FIELDS)
            rows: list[Any] = pipe.execute()
            return rows

        rows = self.call(read) if run_ids else []
        return [_summary(r, row) for r, row in zip(run_ids, rows, strict=True)]


def index_of(query: RunQuery) -> str:
    """The narrowest index that holds every run `query` can match."""
    if query.graph_id and query.status:
        return keys.index_graph_status(query.graph_id, query.status)
    if query.graph_id:
        return keys.index_graph(query.graph_id)
    if query.status:
        return keys.index_status(query.status)
    return keys.index_all()


class _Pager:
    """Reads one page: index entries in batches (a range by score with LIMIT), then their summaries.

    Positions count index entries from the newest at or below `top`. The cursor of the next
    page is the creation time of the last run returned and how many entries created in that
    same millisecond come up to it, so newer runs added meanwhile never shift a later page.
    """

    def __init__(self, index: RunIndex, query: RunQuery) -> None:
        self.index, self.query = index, query
        self.key = index_of(query)
        top, self.skip = query.start()
        self.top: int | str = "+inf" if top is None else top
        self.floor: int | str = "-inf" if query.since_ms is None else query.since_ms
        self.found: list[RunSummary] = []
        self.last = (0, 0, 0)  # the last run returned: its position, score, first position of that score

    def run(self) -> RunPage:
        """Read batches until the page is full and one more match is seen, or the range ends."""
        pos, size, previous, tie = self.skip, self.query.limit + 1, -1, self.skip
        while True:
            entries = self._range(pos, size)
            if pos == 0 and entries and self.top == "+inf":
                self.top = int(entries[0][1])  # later batches are not shifted by newer runs
            summaries = self.index.summaries([run_id for run_id, _ in entries])
            for i, ((_, raw), summary) in enumerate(zip(entries, summaries, strict=True)):
                score = int(raw)
                if score != previous:
                    previous, tie = score, pos + i
                if summary is None or not self._matches(summary):
                    continue
                if len(self.found) == self.query.limit:
                    return self._done(more=True)
                self.found.append(summary)
                self.last = (pos + i, score, tie)
            if len(entries) < size:
                return self._done(more=False)
            if len(self.found) == self.query.limit:
                return self._done(more=True)
            pos, size = pos + len(entries), min(2 * size, MAX_BATCH)

    def _range(self, pos: int, size: int) -> list[tuple[str, float]]:
        key, top, floor = self.key, self.top, self.floor
        found: list[tuple[str, float]] = self.index.call(
            lambda: self.index.redis.zrevrangebyscore(key, top, floor, start=pos, num=size, withscores=True)
        )
        return found

    def _matches(self, summary: RunSummary) -> bool:
        """The record agrees with the index (a status index lags the commit by one pipeline)."""
        q = self.query
        status_ok = q.status is None or summary.status == q.status
        return status_ok and (q.graph_id is None or summary.graph_id == q.graph_id)

    def _done(self, more: bool) -> RunPage:
        if not more or not self.found:
            return RunPage(tuple(self.found))
        return RunPage(tuple(self.found), self._cursor().encode())

    def _cursor(self) -> Cursor:
        position, score, tie = self.last
        return Cursor(score, position + 1 - self._newer(score, tie))

    def _newer(self, score: int, tie: int) -> int:
        """How many entries at or below `top` are newer than `score` (created later)."""
        if tie > self.skip or self.skip == 0:
            return tie  # entries read before `tie` are newer, and none before `skip` ties
        key, top = self.key, self.top  # everything read ties with `score`: count the newer ones
        count: int = self.index.call(lambda: self.index.redis.zcount(key, f"({score}", top))
        return count


def _summary(run_id: str, row: Sequence[str | None]) -> RunSummary | None:
    status, step, graph_id, created, updated = row
    if status is None:
        return None
    return RunSummary(run_id, graph_id or "", status, int(step or 0), int(created or 0), int(updated or 0))
