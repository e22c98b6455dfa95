"""A run's timeline, from its transcript: per step when it began and started, how long its task
waited in the queue and ran, on which worker, the time it spent suspended (retry backoffs,
durable sleeps, waiting for items or child runs), and a foreach step's items.

Pure functions over parsed records: `reading.timeline_json` reads them (a window of the
transcript, capped), `timeline` shapes them for `/api/runs/<id>/timeline`, and `layout` places
them on the run page as bars (percentages of the span the window covers).

A step's row: its `begun_at` (only when it was suspended) to `started_at` is suspension, of
which the last `queue_ms` its final task waited in the queue; then `duration_ms` of run time.
The records around it (a retry with its delay, a durable sleep, a cancel, ...) are its marks.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from graphrunner.services.records import (
    AnyRecord,
    CancelRecord,
    ResumeRecord,
    RetryRecord,
    SleepRecord,
    StepRecord,
    UnknownRecord,
    error_of,
)
from graphrunner.services.timings import ItemTimes

MAX_ITEMS_SHOWN = 200  # items of one foreach step a timeline lists (its failed ones first)
MAX_ITEMS_TOTAL = 2000  # items listed in one timeline in all: the others are counted, not listed
MIN_WIDTH = 0.3  # percent: a bar too short to see is drawn this wide
MESSAGE_CHARS = 300


def ms_of(iso: str | None) -> float | None:
    """An ISO date-time as epoch milliseconds; None when absent or unreadable."""
    if not iso:
        return None
    try:
        return datetime.fromisoformat(iso).timestamp() * 1000
    except ValueError:
        return None


def stream_ms(entry_id: str) -> float | None:
    """When a transcript record was appended: the milliseconds of its stream id `MS-SEQ`."""
    head = entry_id.split("-", 1)[0]
    return float(head) if head.isdigit() else None


def duration(ms: float | None) -> str:
    """Milliseconds as a person reads them: `0.4 ms`, `12 ms`, `3.2 s`, `4 min 5 s`, `2 h 3 min`."""
    if ms is None:
        return ""
    if ms < 10:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    minutes, seconds = divmod(int(ms // 1000), 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    return f"{minutes // 60} h {minutes % 60} min"


def timeline(entries: Sequence[tuple[str, AnyRecord]]) -> dict[str, Any]:
    """The rows of transcript `entries` `(stream id, record)`: one per step, the records around
    it as its marks; and the span `[start_ms, end_ms]` they cover."""
    rows: list[dict[str, Any]] = []
    open_rows: dict[tuple[int, str | None], dict[str, Any]] = {}  # steps whose record is not read yet
    room, skipped = MAX_ITEMS_TOTAL, 0
    for entry_id, record in entries:
        if isinstance(record, UnknownRecord):
            skipped += 1
            continue
        key = (record.step, record.node)
        row = open_rows.get(key)
        if row is None:
            row = open_rows[key] = _row(record)
            rows.append(row)
        if isinstance(record, StepRecord):
            row.update(_step(entry_id, record, room))
            _within(row)
            room -= len(row["items"]["items"]) if row["items"] else 0
            del open_rows[key]
        else:
            row["marks"].append(_mark(entry_id, record))
    start, end = _span(rows)
    return {"rows": rows, "start_ms": start, "end_ms": end, "records": len(entries), "unknown": skipped}


def _row(record: AnyRecord) -> dict[str, Any]:
    """A step's row before its step record is read (a step in progress has none yet)."""
    return {
        "step": record.step,
        "node": record.node,
        "status": None,
        "id": None,
        "started_at": None,
        "start_ms": None,
        "begun_at": None,
        "begun_ms": None,
        "suspended_ms": None,
        "queue_ms": None,
        "duration_ms": None,
        "worker": None,
        "attempts": None,
        "error": None,
        "items": None,
        "marks": [],
    }


def _step(entry_id: str, record: StepRecord, room: int) -> dict[str, Any]:
    start, begun = ms_of(record.started_at), ms_of(record.begun_at)
    suspended = None
    if start is not None and begun is not None:
        suspended = max(0.0, start - begun - (record.queue_ms or 0.0))
    return {
        "status": record.status,
        "id": entry_id,
        "started_at": record.started_at,
        "start_ms": start,
        "begun_at": record.begun_at,
        "begun_ms": begun,
        "suspended_ms": suspended,
        "queue_ms": record.queue_ms,
        "duration_ms": record.duration_ms,
        "worker": record.worker,
        "attempts": record.attempts,
        "error": _error(record),
        "items": items_view(record.items, room) if record.items is not None else None,
    }


def _within(row: dict[str, Any]) -> None:
    """Marks recorded after the step's final task started happened in it (a retry slept in the
    task: its record is written with the step's): its run time holds them, no bar of their own."""
    for mark in row["marks"]:
        mark["within"] = row["start_ms"] is not None and (mark["at_ms"] or 0) >= row["start_ms"]


def _mark(entry_id: str, record: AnyRecord) -> dict[str, Any]:
    """A record around a step: a retry's backoff and a sleep span time; the others are moments."""
    at = ms_of(getattr(record, "at", None))
    mark: dict[str, Any] = {"id": entry_id, "kind": record.status, "at_ms": at or stream_ms(entry_id)}
    delay = None
    if isinstance(record, RetryRecord):
        delay = record.retry_in_s * 1000
        mark["attempts"] = record.attempts
    elif isinstance(record, SleepRecord):
        delay = record.sleep_s * 1000
    elif isinstance(record, CancelRecord | ResumeRecord):
        mark["from"] = record.from_
    mark["ms"] = delay
    mark["until_ms"] = mark["at_ms"] + delay if delay is not None and mark["at_ms"] is not None else None
    mark["within"] = False
    mark["worker"] = getattr(record, "worker", None)
    mark["error"] = _error(record)
    return mark


def _error(record: AnyRecord) -> dict[str, Any] | None:
    error = error_of(record)
    if error is None:
        return None
    return {"type": error.type, "error_type": error.error_type, "message": error.message[:MESSAGE_CHARS]}


def items_view(times: ItemTimes, room: int) -> dict[str, Any]:
    """A foreach step's items: the counts and percentiles, and up to `MAX_ITEMS_SHOWN` (and
    `room`) of the kept items, its failed ones first, listed in index order."""
    failed = [t for t in times.items if not t.ok]
    chosen = (failed + [t for t in times.items if t.ok])[: max(0, min(MAX_ITEMS_SHOWN, room))]
    return {
        "count": times.count,
        "failed": times.failed,
        "p50_ms": times.p50_ms,
        "p95_ms": times.p95_ms,
        "max_ms": times.max_ms,
        "items": [t.model_dump(mode="json") for t in sorted(chosen, key=lambda t: t.i)],
        "items_omitted": times.count - len(chosen),
    }


def _span(rows: Sequence[dict[str, Any]]) -> tuple[float | None, float | None]:
    """The earliest and latest moment the rows show (None, None when none is timed)."""
    moments: list[float] = []
    for row in rows:
        start = row["start_ms"]
        if start is not None:
            moments += [start - (row["queue_ms"] or 0.0), start + (row["duration_ms"] or 0.0)]
        if row["begun_ms"] is not None:
            moments.append(row["begun_ms"])
        for mark in row["marks"]:
            if not mark["within"]:
                moments += [m for m in (mark["at_ms"], mark["until_ms"]) if m is not None]
        for item in row["items"]["items"] if row["items"] else ():
            if item["at"]:
                moments += [item["at"], item["at"] + (item["ms"] or 0.0)]
    return (min(moments), max(moments)) if moments else (None, None)


def layout(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of a `timeline` with their bars: `{row, bars, items}`, each bar `{kind, left,
    width, title}` in percent of the timeline's span."""
    start, end = data["start_ms"], data["end_ms"]
    if start is None or end is None:
        return [{"row": row, "bars": [], "items": []} for row in data["rows"]]
    scale = _Scale(start, end)
    return [{"row": row, "bars": _bars(row, scale), "items": _item_bars(row, scale)} for row in data["rows"]]


class _Scale:
    """Places moments of `[start, end]` (ms) in percent."""

    def __init__(self, start: float, end: float) -> None:
        self.start, self.span = start, max(end - start, 1.0)

    def bar(self, kind: str, since: float, until: float, title: str) -> dict[str, Any]:
        width = min(100.0, max(MIN_WIDTH, (until - since) / self.span * 100))
        left = min(100.0 - width, max(0.0, (since - self.start) / self.span * 100))  # a short last bar shows
        return {
            "kind": kind,
            "left": round(left, 3),
            "width": round(width, 3),
            "title": title,
        }


def _bars(row: dict[str, Any], scale: _Scale) -> list[dict[str, Any]]:
    bars = []
    start, queue = row["start_ms"], row["queue_ms"] or 0.0
    if row["begun_ms"] is not None and start is not None:
        title = f"suspended {duration(row['suspended_ms'])}"
        bars.append(scale.bar("suspended", row["begun_ms"], start - queue, title))
    for mark in row["marks"]:
        if mark["at_ms"] is None or mark["within"]:
            continue
        until = mark["until_ms"] or mark["at_ms"]
        title = f"{mark['kind']} {duration(mark['ms'])}".strip()
        bars.append(scale.bar(f"mark {mark['kind']}", mark["at_ms"], until, title))
    if start is not None:
        if row["queue_ms"] is not None:
            bars.append(scale.bar("queue", start - queue, start, f"queued {duration(queue)}"))
        ran = row["duration_ms"] or 0.0
        bars.append(scale.bar(f"run {row['status']}", start, start + ran, f"ran {duration(ran)}"))
    return bars


def _item_bars(row: dict[str, Any], scale: _Scale) -> list[dict[str, Any]]:
    shown = []
    for item in row["items"]["items"] if row["items"] else ():
        state = "ok" if item["ok"] else "failed"
        title = f"item {item['i']} {state} {duration(item['ms'])}".strip()
        bar = (
            scale.bar(f"item {state}", item["at"], item["at"] + (item["ms"] or 0.0), title)
            if item["at"]
            else None
        )
        shown.append({"item": item, "bar": bar})
    return shown
