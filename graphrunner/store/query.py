"""Which runs to list and where the next page starts: `RunQuery`, `RunPage` and `Cursor`."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from graphrunner.engine import RunStatus
from graphrunner.errors import InvalidRunQuery

MAX_LIMIT = 1000
STATUSES = tuple(s.value for s in RunStatus)
CURSOR = re.compile(r"^(\d{1,16})-(\d{1,9})$")

TimeBound = datetime | int | None


@dataclass(frozen=True)
class RunSummary:
    """A run as listed: id, graph, status, step and timestamps (ms)."""

    run_id: str
    graph_id: str
    status: str
    step: int
    created_at: int
    updated_at: int

    def to_dict(self, time: Callable[[int], Any] = int) -> dict[str, Any]:
        """The run in a JSON list of runs (the explorer's `/api/runs`, `graphrunner list --json`):
        ids, status, step count, and its times in epoch ms or as `time` writes them."""
        return {
            "run_id": self.run_id,
            "graph_id": self.graph_id,
            "status": self.status,
            "step_count": self.step,
            "created_at": time(self.created_at),
            "updated_at": time(self.updated_at),
        }


@dataclass(frozen=True)
class Cursor:
    """The next page starts at runs created at `score` ms or earlier, after `skip` created at `score`."""

    score: int
    skip: int

    def encode(self) -> str:
        """`SCORE-SKIP`, e.g. `1767225600123-2`."""
        return f"{self.score}-{self.skip}"

    @classmethod
    def decode(cls, text: str) -> Cursor:
        """The cursor `encode` wrote; raises `InvalidRunQuery` for anything else."""
        found = CURSOR.match(text.strip()) if isinstance(text, str) else None
        if not found:
            raise InvalidRunQuery(f"malformed cursor {text!r}: pass the cursor a previous page printed")
        return cls(int(found[1]), int(found[2]))


@dataclass(frozen=True)
class RunPage:
    """One page of listed runs, newest first, and the cursor of the next page (None: no more)."""

    runs: tuple[RunSummary, ...]
    next_cursor: str | None = None


@dataclass(frozen=True, kw_only=True)
class RunQuery:
    """Runs of `graph_id` in `status` created in `[since_ms, until_ms)`, a page of `limit`."""

    graph_id: str | None = None
    status: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    limit: int = 50
    offset: int = 0
    cursor: Cursor | None = None

    @classmethod
    def build(
        cls,
        graph_id: str | None = None,
        status: str | None = None,
        limit: int = 50,
        offset: int = 0,
        *,
        since: TimeBound = None,
        until: TimeBound = None,
        cursor: str | None = None,
    ) -> RunQuery:
        """A checked query; raises `InvalidRunQuery` naming the bad argument."""
        if status is not None and status not in STATUSES:
            raise InvalidRunQuery(f"unknown status {status!r}; use one of {', '.join(STATUSES)}")
        if graph_id is not None and (not isinstance(graph_id, str) or not graph_id):
            raise InvalidRunQuery(f"graph_id must be a non-empty string, got {graph_id!r}")
        _whole("limit", limit, 1, MAX_LIMIT)
        _whole("offset", offset, 0, None)
        if cursor is not None and offset:
            raise InvalidRunQuery("pass either a cursor or an offset, not both")
        since_ms, until_ms = epoch_ms("since", since), epoch_ms("until", until)
        if since_ms is not None and until_ms is not None and since_ms >= until_ms:
            raise InvalidRunQuery(f"since ({since_ms} ms) must be before until ({until_ms} ms)")
        parsed = Cursor.decode(cursor) if cursor is not None else None
        return cls(
            graph_id=graph_id,
            status=status,
            since_ms=since_ms,
            until_ms=until_ms,
            limit=limit,
            offset=offset,
            cursor=parsed,
        )

    def start(self) -> tuple[int | None, int]:
        """The highest creation time (ms, inclusive; None: no bound) and how many runs at it to skip."""
        top = None if self.until_ms is None else self.until_ms - 1
        if self.cursor is None:
            return top, self.offset
        if top is not None and top < self.cursor.score:
            return top, 0
        return self.cursor.score, self.cursor.skip


def epoch_ms(name: str, value: TimeBound) -> int | None:
    """A time bound as epoch milliseconds: a datetime (naive means UTC) or epoch ms already."""
    if value is None:
        return None
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        ms = int(aware.timestamp() * 1000)
    elif isinstance(value, int) and not isinstance(value, bool):
        ms = value
    else:
        raise InvalidRunQuery(
            f"{name} must be a datetime or epoch milliseconds (int), got {type(value).__name__} {value!r}"
        )
    if ms < 0:
        raise InvalidRunQuery(f"{name} must not be before 1970, got {value!r}")
    return ms


def _whole(name: str, value: int, low: int, high: int | None) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidRunQuery(f"{name} must be a whole number, got {value!r}")
    if value < low or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise InvalidRunQuery(f"{name} must be {bounds}, got {value}")


def page_of(rows: Sequence[RunSummary], query: RunQuery) -> RunPage:
    """The page of `rows` (every run there is) that `query` asks for, newest first, ties by run id
    descending; the cursor counts the runs of the last one's millisecond up to it."""
    found = sorted(
        (r for r in rows if _matches(r, query)), key=lambda r: (r.created_at, r.run_id), reverse=True
    )
    top, skip = query.start()
    if top is not None:
        found = [r for r in found if r.created_at <= top]
    start = skip if query.cursor is None else _after_ties(found, top, skip)
    page = tuple(found[start : start + query.limit])
    if start + query.limit >= len(found) or not page:
        return RunPage(page)
    last = page[-1].created_at
    ties = sum(1 for r in found[: start + len(page)] if r.created_at == last)
    return RunPage(page, Cursor(last, ties).encode())


def _after_ties(found: list[RunSummary], top: int | None, skip: int) -> int:
    """Where a cursor's page starts: after `skip` runs created at `top`."""
    ties = [i for i, r in enumerate(found) if r.created_at == top]
    return ties[skip] if skip < len(ties) else (ties[-1] + 1 if ties else 0)


def _matches(row: RunSummary, query: RunQuery) -> bool:
    if query.graph_id is not None and row.graph_id != query.graph_id:
        return False
    if query.status is not None and row.status != query.status:
        return False
    return query.since_ms is None or row.created_at >= query.since_ms
