"""What the explorer reads from and writes to the store, through the client: blocking calls, run
on the explorer's threads by the handlers."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from graphrunner.cluster.runs.ids import check_run_id
from graphrunner.errors import GraphNotFound, InvalidRunQuery, RunNotFound
from graphrunner.services.records import parse
from graphrunner.store import now_ms
from graphrunner.telemetry.propagation import valid_traceparent
from graphrunner.ui.node_stats import DEFAULT_WINDOW, WINDOWS, node_stats
from graphrunner.ui.permits import check_grants, run_capabilities
from graphrunner.ui.timeline import timeline
from graphrunner.ui.views import capped, int_field, run_view, steps_view, version_view

if TYPE_CHECKING:
    from graphrunner.client import Client
    from graphrunner.engine import RunSnapshot
    from graphrunner.graph import Graph
    from graphrunner.store import StepEntry

MAX_STEPS_PAGE = 500
STREAM_ID = re.compile(r"\d{1,16}-\d{1,20}")
MAX_SEQ = 2**64 - 1  # the highest sequence number of a stream id: `MS-MAX_SEQ` is the last of MS
LATEST_SPANS_MS = (1_000, 10_000, 60_000, 600_000, 3_600_000, 86_400_000, 604_800_000)
TIMELINE_RECORDS = 500  # transcript records a timeline reads by default (a run can have 100k)
MAX_TIMELINE_RECORDS = 2000
STATS_RUNS = 500  # the graph page's per-node stats read the most recent runs in the window, this many
STATS_RECORDS = 100  # and the first records of each run's transcript, this many
RUNS_FOR_VERSIONS = 50  # runs counted per version, and versions found by runs (stored before the index)
VERSIONS_DRAWN = 10  # the graph page draws the newest stored versions, this many; the others are listed


class StateKeyNotFound(RunNotFound):
    """The run has no such state key."""


@dataclass(frozen=True)
class RunPageData:
    """What the run page shows: the run (capped), its drawing or why there is none, its steps."""

    run: dict[str, Any]
    svg: str | None
    notes: tuple[str, ...]
    steps: dict[str, Any]
    timeline: dict[str, Any]


def runs_page(client: Client, args: Mapping[str, str]) -> dict[str, Any]:
    """`/api/runs`: a page of runs newest first, filtered by graph, status and creation time."""
    page = client.list_page(
        args.get("graph") or None,
        args.get("status") or None,
        _whole(args, "limit", 50),
        _whole(args, "offset", 0),
        since=_time(args, "since"),
        until=_time(args, "until"),
        cursor=args.get("cursor") or None,
        schedule=args.get("schedule") or None,
    )
    return {"runs": [r.to_dict() for r in page.runs], "next_cursor": page.next_cursor}


def snapshot(client: Client, run_id: str) -> RunSnapshot:
    """The run's snapshot; raises `InvalidRunId`, `RunNotFound`."""
    return client.run(run_id).snapshot()


def run_json(client: Client, run_id: str) -> dict[str, Any]:
    """`/api/runs/<id>`: the run, state capped."""
    snap = snapshot(client, run_id)
    stored = bool(snap.graph_hash) and client.store.load_graph(snap.graph_hash) is not None
    return run_view(snap, client.store.run_fields(snap.run_id), stored, client.settings.trace_url)


def steps_json(client: Client, run_id: str, args: Mapping[str, str]) -> dict[str, Any]:
    """`/api/runs/<id>/steps`: transcript records after `after` (a stream id), `limit` at most."""
    snap = snapshot(client, run_id)
    limit = _whole(args, "limit", 100)
    if not 1 <= limit <= MAX_STEPS_PAGE:
        raise InvalidRunQuery(f"limit must be 1-{MAX_STEPS_PAGE}, got {limit}")
    entries = client.store.steps(snap.run_id, args.get("after") or "-", count=limit + 1)
    return steps_view([(e.id, parse(e.record)) for e in entries], limit)


def timeline_json(client: Client, run_id: str, args: Mapping[str, str]) -> dict[str, Any]:
    """`/api/runs/<id>/timeline`: the timeline of `limit` transcript records after `after` (a
    stream id; the first records by default), or with `latest` of the run's latest records; and
    where the next window starts."""
    snap = snapshot(client, run_id)
    limit = _whole(args, "limit", TIMELINE_RECORDS)
    if not 1 <= limit <= MAX_TIMELINE_RECORDS:
        raise InvalidRunQuery(f"limit must be 1-{MAX_TIMELINE_RECORDS}, got {limit}")
    latest = args.get("latest", "").lower() in ("1", "true", "yes")
    after = args.get("after") or "-"
    if after != "-" and not STREAM_ID.fullmatch(after):
        raise InvalidRunQuery(
            f"after must be a transcript position (MS-SEQ, a next_after), got {after!r:.60}"
        )
    if latest:
        after, entries = _latest(client, snap.run_id, limit)
    else:
        entries = client.store.steps(snap.run_id, after, count=limit + 1)
    more = len(entries) > limit
    entries = entries[:limit]
    return {
        "run_id": snap.run_id,
        "status": snap.status.value,
        "step_count": snap.step,
        "after": None if after == "-" else after,
        "latest": latest,
        "limit": limit,
        "more": more,
        "next_after": entries[-1].id if more and entries else None,
        **timeline([(e.id, parse(e.record)) for e in entries]),
    }


def _latest(client: Client, run_id: str, limit: int) -> tuple[str, list[StepEntry]]:
    """The run's latest transcript records, `limit` at most, and the position they follow.

    A transcript is read forwards only, and its positions are times (`MS-SEQ`): so the stretches
    of time before the run's last update in `LATEST_SPANS_MS` are tried, shortest first, and the
    longest one holding no more than `limit` records is taken (when even the shortest holds more,
    its first `limit + 1`; when one reaches back to the run's creation, the whole transcript)."""
    fields = client.store.run_fields(run_id)
    last, created = int_field(fields.get("updated_at")), int_field(fields.get("created_at")) or 0
    chosen: tuple[str, list[StepEntry]] | None = None
    for span in LATEST_SPANS_MS if last is not None else ():
        since = (last or 0) - span
        after = "-" if since <= created else f"{since - 1}-{MAX_SEQ}"
        entries = client.store.steps(run_id, after, count=limit + 1)
        if len(entries) > limit:
            return chosen or (after, entries)
        chosen = (after, entries)
        if after == "-":
            return chosen
    return chosen or ("-", client.store.steps(run_id, "-", count=limit + 1))


def graph_stats(client: Client, graph_id: str, window: str | None) -> dict[str, Any]:
    """`/api/graph-stats/<id>`: per-node stats over the runs of the graph created in the last
    `window` (`1h`, `24h`, `7d`): the most recent `STATS_RUNS` of them, the first
    `STATS_RECORDS` records of each one's transcript; says how much was read and left out."""
    window = window or DEFAULT_WINDOW
    if window not in WINDOWS:
        raise InvalidRunQuery(f"window must be one of {', '.join(WINDOWS)}, got {window!r:.40}")
    since = now_ms() - WINDOWS[window]
    page = client.list_page(graph_id, limit=STATS_RUNS, since=since)
    if not page.runs and not client.store.graph_versions(graph_id):
        raise GraphNotFound(f"no stored versions or runs of graph {graph_id!r} in the store")
    records, truncated = [], 0
    for summary in page.runs:
        entries = client.store.steps(summary.run_id, count=STATS_RECORDS + 1)
        truncated += len(entries) > STATS_RECORDS
        records += [parse(e.record) for e in entries[:STATS_RECORDS]]
    return {
        "graph_id": graph_id,
        "window": window,
        "windows": list(WINDOWS),
        "since": since,
        "runs_read": len(page.runs),
        "runs_capped": page.next_cursor is not None,
        "max_runs": STATS_RUNS,
        "records_per_run": STATS_RECORDS,
        "runs_truncated": truncated,
        "records_read": len(records),
        "nodes": node_stats(records),
    }


def full_state(client: Client, run_id: str, key: str | None, at: str | None = None) -> Any:
    """`/api/runs/<id>/state[?at=STEP]`: the whole state (now, or after step `at` from the run's
    history), or the value of one key."""
    if at is None:
        state = snapshot(client, run_id).state
    else:
        state = client.state_at(check_run_id(run_id), _whole({"at": at}, "at", None))
    if key is None:
        return state
    if key not in state:
        raise StateKeyNotFound(f"run {run_id} has no state key {key!r}")
    return state[key]


def run_page(
    client: Client, run_id: str, after: str | None, timeline_args: Mapping[str, str] | None = None
) -> RunPageData:
    """The run page: the run, its graph version drawn with its path, its timeline (a window as
    `timeline_args` say: `after`, `latest`) and a page of its transcript."""
    from graphrunner.render import render
    from graphrunner.stored_runs import read_run

    run = run_json(client, run_id)
    svg: str | None = None
    notes: tuple[str, ...] = ()
    try:
        stored = read_run(client, run_id)
        svg, notes = render(stored.spec, "svg", run=stored.trace), stored.warnings
    except GraphNotFound as exc:
        notes = (str(exc),)
    steps = steps_json(client, run_id, {"after": after or "-", "limit": "100"})
    times = timeline_json(client, run_id, timeline_args or {})
    return RunPageData(run, _inline(svg), notes, steps, times)


def graph_json(client: Client, graph_id: str, drawn: bool = False) -> dict[str, Any]:
    """`/api/graphs/<id>`: the graph's versions and its recent runs; with `drawn`, the newest
    `VERSIONS_DRAWN` stored versions as SVG.

    The versions are those the store's index lists (newest first, the newest `VERSIONS_KEPT`),
    then those only its recent runs are pinned to (stored before the index existed: `indexed`
    false, `stored_at` null); each says whether its definition is still stored."""
    page = client.list_page(graph_id, limit=RUNS_FOR_VERSIONS)
    versions = {v.content_hash: version_view(v) for v in client.store.graph_versions(graph_id)}
    for summary in page.runs:
        snap = client.store.load_run(summary.run_id)
        if snap is None:
            continue
        version = versions.setdefault(snap.graph_hash, version_view(None, snap.graph_hash))
        version["runs"] += 1
        version["last_run_at"] = version["last_run_at"] or summary.created_at
    if not versions:
        raise GraphNotFound(f"no stored versions or runs of graph {graph_id!r} in the store")
    to_draw = VERSIONS_DRAWN if drawn else 0
    for version in versions.values():
        version.update(_version(client, version, to_draw > 0))
        to_draw -= bool(version.get("svg"))
    return {
        "graph_id": graph_id,
        "versions": list(versions.values()),
        "versions_drawn": VERSIONS_DRAWN if drawn else 0,
        "runs": [r.to_dict() for r in page.runs[:20]],
    }


def _version(client: Client, version: Mapping[str, Any], draw: bool) -> dict[str, Any]:
    from graphrunner.loading import parse_spec
    from graphrunner.render import render

    content_hash = version["graph_hash"]
    known_gone = version.get("stored") is False  # the index says so: no read
    stored = client.store.load_graph(content_hash) if content_hash and not known_gone else None
    if stored is None:
        return {"stored": False, "text": None}
    view: dict[str, Any] = {"stored": True, "text": capped(stored.get("text")), "file": stored.get("file")}
    if draw:
        view["svg"] = _inline(
            render(parse_spec(str(stored["text"]), stored.get("file"), stored.get("id")), "svg")
        )
    return view


def submit(
    client: Client,
    body: Mapping[str, Any],
    granted: Sequence[str],
    user: str | None,
    traceparent: str | None = None,
) -> tuple[int, dict[str, Any]]:
    """`POST /api/runs`: 201 for a new run, 202 for one queued behind its concurrency key, 200 for
    a run id submitted before with the same graph and inputs. The run carries the login's
    capabilities `granted` (or the body's narrower `capabilities`); a graph that needs more is
    refused (`SubmitRefused`) before anything is stored. The run's trace hangs under the
    request's W3C `traceparent` header; an invalid one is ignored, as W3C Trace Context says."""
    graph_ref, inputs = body.get("graph"), body.get("inputs") or {}
    run_id, key = body.get("run_id"), body.get("concurrency_key")
    if not isinstance(graph_ref, str) or not graph_ref:
        raise InvalidRunQuery('"graph" must be a graph id (a non-empty string)')
    if not isinstance(inputs, dict):
        raise InvalidRunQuery('"inputs" must be a JSON object')
    if run_id is not None:
        check_run_id(run_id)
    capabilities = run_capabilities(granted, body.get("capabilities"), user)
    when_busy = body.get("when_busy", "queue")
    graph = find_graph(client, graph_ref)
    check_grants(client, graph, capabilities, user)
    existed = run_id is not None and bool(client.store.run_fields(run_id))
    if traceparent is not None and not valid_traceparent(traceparent):
        traceparent = None
    handle = client.submit(
        graph,
        inputs,
        run_id=run_id,
        capabilities=capabilities,
        concurrency_key=key,
        when_busy=when_busy,
        traceparent=traceparent,
    )
    status = client.store.status_of(handle.id)
    code = 200 if existed else 202 if status == "pending" else 201
    return code, {"run_id": handle.id, "status": status}


def find_graph(client: Client, graph_id: str) -> Graph:
    """Graph `graph_id` from the graph path, else the version its latest run is pinned to."""
    from graphrunner.graph import Graph
    from graphrunner.loading import load_graph
    from graphrunner.loading.locate import find_by_id

    if graph_id.startswith(("/", "\\")) or ".." in graph_id.replace("\\", "/").split("/"):
        raise GraphNotFound(f"{graph_id!r} is not a graph id")
    try:
        path = find_by_id(graph_id, [d for d in client.settings.graph_path if d.is_dir()])
    except (OSError, ValueError):  # a name the file system cannot take (too long, ...)
        raise GraphNotFound(f"{graph_id!r:.120} is not a graph id") from None
    if path is not None:
        return load_graph(path, settings=client.settings)
    latest = client.list_page(graph_id, limit=1).runs
    snap = client.store.load_run(latest[0].run_id) if latest else None
    if snap is not None and snap.graph_hash and client.store.load_graph(snap.graph_hash) is not None:
        graph = client.cluster.graphs.get(snap.graph_hash)
        if isinstance(graph, Graph):
            return graph
    raise GraphNotFound(f"no graph with id {graph_id!r} on GRAPHRUNNER_GRAPH_PATH or in the store")


def _inline(svg: str | None) -> str | None:
    """An SVG document as an element to put in a page (no XML declaration)."""
    if svg is None:
        return None
    return svg[svg.index("<svg") :] if "<svg" in svg else svg


def _time(args: Mapping[str, str], name: str) -> int | None:
    """A time bound as epoch ms: a whole number (ms) or an ISO date-time (naive: UTC)."""
    text = args.get(name)
    if not text or text.isdigit():
        return int(text) if text else None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidRunQuery(f"{name} must be epoch ms or an ISO date-time, got {text!r}") from None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _whole(args: Mapping[str, str], name: str, default: int | None) -> Any:
    text = args.get(name)
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise InvalidRunQuery(f"{name} must be a whole number, got {text!r}") from None
