"""Progress lines for stderr: `[graph:ID] step N <node> ✓ 12ms (+summary, meta)`; JSON lines."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from graphrunner.cli.common import indented
from graphrunner.text import SURROGATE

if TYPE_CHECKING:  # records bring the graph model along: not for --help
    from graphrunner.services.records import AnyRecord

SYMBOLS = {
    "ok": "✓",
    "error": "✗",
    "end": "⏹",
    "paused": "⏸",
    "retry": "↻",
    "sleeping": "⏲",
    "cancelled": "⊘",
    "resumed": "▶",
    "admitted": "▶",
    "swept": "⟳",
}
MAX_MESSAGE = 80


def format_step(graph_id: str, record: Mapping[str, Any] | AnyRecord) -> str:
    """One progress line for a transcript record (as stored, or read by `records.parse`)."""
    from graphrunner.services.records import StepRecord, changes, error_of, parse

    record = parse(record)
    head = f"[graph:{graph_id}] step {record.step} {record.node} {SYMBOLS.get(record.status, '?')}"
    duration = format_duration(record.duration_ms) if isinstance(record, StepRecord) else ""
    keys = changes(record)[0]
    more = (duration, _note(record), f"(+{', '.join(keys)})" if keys else "")
    line = " ".join([head, *(part for part in more if part)])
    failure = error_of(record)
    if failure is not None:
        line += f" — {shorten(failure.message or failure.type or 'error')}"
    elif isinstance(record, StepRecord) and record.message:  # a pause node's message
        line += f" — {shorten(record.message)}"
    return line


def _note(record: AnyRecord) -> str:
    """What a record of what happened around a step says; empty for a step's record."""
    from graphrunner.services import records as r

    if isinstance(record, r.RetryRecord):
        return f"attempt {record.attempts} failed, retrying in {record.retry_in_s}s"
    if isinstance(record, r.SleepRecord):
        return f"sleeping {record.sleep_s}s (no worker held)"
    if isinstance(record, r.CancelRecord):
        return f"cancelled ({record.reason})"
    if isinstance(record, r.ResumeRecord):
        return f"resumed (was {record.from_})"
    if isinstance(record, r.AdmitRecord):
        return f"admitted: concurrency key {record.key} handed on by {record.after}"
    if isinstance(record, r.SweepRecord):
        return f"stalled {record.idle_s}s: the sweeper {record.action}"
    return ""


def progress_line(graph_id: str, record: Mapping[str, Any] | AnyRecord, tracebacks: bool = False) -> str:
    """The progress line of a transcript record; with `tracebacks`, its error's traceback under it."""
    from graphrunner.services.records import error_of, parse

    record = parse(record)
    line = format_step(graph_id, record)
    failure = error_of(record)
    if tracebacks and failure is not None and failure.traceback:
        line += "\n" + indented(failure.traceback)
    return line


def json_line(data: Any) -> str:
    """`data` as JSON on one line (escaped where UTF-8 cannot write a string as it is)."""
    text = json.dumps(data, default=str, ensure_ascii=False)
    return json.dumps(data, default=str) if SURROGATE.search(text) else text


def format_duration(ms: Any) -> str:
    """`12ms`, `<1ms`, `1.5s`; empty when unknown."""
    if not isinstance(ms, int | float) or isinstance(ms, bool):
        return ""
    if ms < 0.5:
        return "<1ms"
    if ms >= 10_000:
        return f"{ms / 1000:.1f}s"
    return f"{round(ms)}ms"


def shorten(text: str, limit: int = MAX_MESSAGE) -> str:
    """The first line of `text`, cut to `limit` characters with an ellipsis."""
    lines = text.strip().splitlines()
    first = lines[0] if lines else ""
    if len(first) > limit or len(lines) > 1:
        return first[: limit - 1].rstrip() + "…"
    return first
