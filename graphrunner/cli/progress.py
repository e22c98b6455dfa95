"""Progress lines for stderr: `[graph:ID] step N <node> ✓ 12ms (+summary, meta)`; JSON lines."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from graphrunner.text import SURROGATE

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
NOTES = {
    "cancelled": "cancelled ({reason})",
    "resumed": "resumed (was {from})",
    "admitted": "admitted: concurrency key {key} handed on by {after}",
    "swept": "stalled {idle_s}s: the sweeper {action}",
}
MAX_MESSAGE = 80


def format_step(graph_id: str, record: Mapping[str, Any]) -> str:
    """One progress line for a step record of the runner's transcript."""
    symbol = SYMBOLS.get(str(record.get("status")), "?")
    parts = [f"[graph:{graph_id}] step {record.get('step', '?')} {record.get('node', '?')} {symbol}"]
    duration = format_duration(record.get("duration_ms"))
    if duration:
        parts.append(duration)
    if record.get("status") == "retry":
        parts.append(
            f"attempt {record.get('attempts', '?')} failed, retrying in {record.get('retry_in_s', '?')}s"
        )
    if record.get("status") == "sleeping":
        parts.append(f"sleeping {record.get('sleep_s', '?')}s (no worker held)")
    note = NOTES.get(str(record.get("status")))
    if note:
        parts.append(note.format_map(_Missing(record)))
    keys = list(record.get("changed_keys") or ())
    if keys:
        parts.append(f"(+{', '.join(str(k) for k in keys)})")
    line = " ".join(parts)
    error = record.get("error")
    if error:
        line += f" — {shorten(error_message(error))}"
    elif record.get("message"):  # a pause node's message
        line += f" — {shorten(str(record['message']))}"
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


def error_message(error: Any) -> str:
    """The message of a step's error (a `{type, message}` mapping, or anything else)."""
    if isinstance(error, Mapping):
        return str(error.get("message") or error.get("type") or "error")
    return str(error)


def shorten(text: str, limit: int = MAX_MESSAGE) -> str:
    """The first line of `text`, cut to `limit` characters with an ellipsis."""
    lines = text.strip().splitlines()
    first = lines[0] if lines else ""
    if len(first) > limit or len(lines) > 1:
        return first[: limit - 1].rstrip() + "…"
    return first


class _Missing(dict[str, Any]):
    """A record for `str.format_map`: missing fields read `?`."""

    def __missing__(self, key: str) -> str:
        return "?"
