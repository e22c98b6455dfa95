"""What the explorer shows of a run, capped: a huge state or transcript never reaches a page whole.

A value whose JSON is over `VALUE_CHARS` is replaced by `{"$truncated": true, "chars": N,
"preview": ...}`; at most `MAX_KEYS` keys of a state are shown. The whole state is at
`/api/runs/<id>/state` (one key with `?key=`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from graphrunner.engine import RunSnapshot
from graphrunner.store import GraphVersion

if TYPE_CHECKING:
    from graphrunner.services.records import AnyRecord

VALUE_CHARS = 4000  # a value's JSON longer than this is shown as a preview
PREVIEW_CHARS = 400
MAX_KEYS = 200  # keys of a state shown, the rest counted
MAX_LISTED = 200  # errors, children, path entries shown
TRACEBACK_CHARS = 20_000


def capped(value: Any) -> Any:
    """`value`, or a preview of it when its JSON is longer than `VALUE_CHARS`."""
    text = json.dumps(value, default=str)
    if len(text) <= VALUE_CHARS:
        return value
    return {"$truncated": True, "chars": len(text), "preview": text[:PREVIEW_CHARS]}


def capped_map(values: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first `MAX_KEYS` entries of `values`, each capped, and what was left out."""
    shown = {k: capped(v) for k, v in list(values.items())[:MAX_KEYS]}
    truncated = sorted(k for k, v in shown.items() if isinstance(v, dict) and v.get("$truncated"))
    return shown, {
        "keys_total": len(values),
        "keys_omitted": max(0, len(values) - MAX_KEYS),
        "values_truncated": truncated,
    }


def run_view(
    snap: RunSnapshot, fields: Mapping[str, str], graph_stored: bool, trace_url: str | None = None
) -> dict[str, Any]:
    """A run as `/api/runs/<id>` answers it: its record, with state, inputs and output capped, and
    its trace linked through the template `trace_url` (GRAPHRUNNER_TRACE_URL)."""
    state, state_cap = capped_map(snap.state)
    inputs, _ = capped_map(snap.inputs)
    return {
        "run_id": snap.run_id,
        "graph_id": snap.graph_id,
        "graph_hash": snap.graph_hash,
        "graph_version_stored": graph_stored,
        "status": snap.status.value,
        "node": snap.node,
        "step_count": snap.step,
        "created_at": int_field(fields.get("created_at")),
        "updated_at": int_field(fields.get("updated_at")),
        "path": list(snap.path[-MAX_LISTED:]),
        "path_length": len(snap.path),
        "message": snap.pause_message if snap.status.value == "paused" else None,
        "paused_at": snap.paused_at.model_dump(mode="json")
        if snap.status.value == "paused" and snap.paused_at is not None
        else None,
        "error": _error(snap.error.to_dict() if snap.error is not None else None),
        "errors": [_error(e.model_dump(mode="json")) for e in snap.errors[:MAX_LISTED]],
        "errors_total": len(snap.errors),
        "wait": snap.wait.model_dump(mode="json") if snap.wait is not None else None,
        "parent": snap.parent.model_dump(mode="json") if snap.parent is not None else None,
        "children": list(snap.children[:MAX_LISTED]),
        "children_total": len(snap.children),
        "concurrency_key": snap.concurrency_key,
        "forked_from": snap.forked_from.model_dump(mode="json") if snap.forked_from is not None else None,
        "schedule": snap.schedule.model_dump(mode="json") if snap.schedule is not None else None,
        "capabilities": list(snap.capabilities),
        "trace": trace_view(snap, trace_url),
        "inputs": inputs,
        "output": capped(snap.output),
        "state": state,
        "state_cap": state_cap,
    }


def trace_view(snap: RunSnapshot, template: str | None) -> dict[str, Any] | None:
    """The run's trace: `{trace_id, url}`, the link made with `template` (None without one);
    None for a run without a trace."""
    if snap.trace is None:
        return None
    url = trace_link(template, snap.trace.trace_id, snap.run_id) if template else None
    return {"trace_id": snap.trace.trace_id, "url": url}


def trace_link(template: str, trace_id: str, run_id: str) -> str | None:
    """`template` with `{trace_id}` and `{run_id}` replaced by the ids, URL-escaped (a plain
    replace: a template may hold other braces, as a Grafana explore URL does); None unless the
    result is an http(s) URL."""
    url = template.replace("{trace_id}", quote(trace_id, safe="")).replace("{run_id}", quote(run_id, safe=""))
    return url if urlsplit(url).scheme.lower() in ("http", "https") else None


def version_view(version: GraphVersion | None, content_hash: str = "") -> dict[str, Any]:
    """A version of a graph as the store's index lists it, or (None) as only a run names it; its
    runs are counted in by the caller."""
    if version is None:
        return {
            "graph_hash": content_hash,
            "stored_at": None,
            "indexed": False,
            "runs": 0,
            "last_run_at": None,
        }
    return {
        "graph_hash": version.content_hash,
        "stored_at": version.stored_at,
        "indexed": True,
        "stored": version.stored,
        "runs": 0,
        "last_run_at": None,
    }


def step_view(record: AnyRecord) -> dict[str, Any]:
    """A transcript record as stored (its JSON form), its carried values capped and its
    traceback bounded."""
    view = record.to_dict()
    values = view.get("changed_values")
    if isinstance(values, Mapping):
        view["changed_values"] = capped_map(values)[0]
    view["error"] = _error(view.get("error"))
    return view


def steps_view(records: Sequence[tuple[str, AnyRecord]], limit: int) -> dict[str, Any]:
    """A page of transcript records `(stream id, record)` and the id to read the next page after."""
    steps = [{"id": entry_id, **step_view(record)} for entry_id, record in records[:limit]]
    more = len(records) > limit
    return {"steps": steps, "next_after": steps[-1]["id"] if more and steps else None}


def _error(error: Any) -> Any:
    if not isinstance(error, Mapping):
        return error
    shown = {k: capped(v) if k != "traceback" else v for k, v in error.items()}
    trace = shown.get("traceback")
    if isinstance(trace, str) and len(trace) > TRACEBACK_CHARS:
        shown["traceback"] = "...\n" + trace[-TRACEBACK_CHARS:]
    return shown


def int_field(text: str | None) -> int | None:
    """A whole number a run record's field holds (`created_at`, ms); None when absent or not one."""
    return int(text) if text and text.lstrip("-").isdigit() else None
