"""What the explorer reads from and writes to the store, through the client: blocking calls, run
on the explorer's threads by the handlers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from graphrunner.cluster.runs.ids import check_run_id
from graphrunner.errors import GraphNotFound, InvalidRunQuery, RunNotFound
from graphrunner.services.records import parse
from graphrunner.ui.permits import check_grants, run_capabilities
from graphrunner.ui.views import capped, run_view, steps_view, version_view

if TYPE_CHECKING:
    from graphrunner.client import Client
    from graphrunner.engine import RunSnapshot
    from graphrunner.graph import Graph

MAX_STEPS_PAGE = 500
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
    )
    return {"runs": [r.to_dict() for r in page.runs], "next_cursor": page.next_cursor}


def snapshot(client: Client, run_id: str) -> RunSnapshot:
    """The run's snapshot; raises `InvalidRunId`, `RunNotFound`."""
    return client.run(run_id).snapshot()


def run_json(client: Client, run_id: str) -> dict[str, Any]:
    """`/api/runs/<id>`: the run, state capped."""
    snap = snapshot(client, run_id)
    stored = bool(snap.graph_hash) and client.store.load_graph(snap.graph_hash) is not None
    return run_view(snap, client.store.run_fields(snap.run_id), stored)


def steps_json(client: Client, run_id: str, args: Mapping[str, str]) -> dict[str, Any]:
    """`/api/runs/<id>/steps`: transcript records after `after` (a stream id), `limit` at most."""
    snap = snapshot(client, run_id)
    limit = _whole(args, "limit", 100)
    if not 1 <= limit <= MAX_STEPS_PAGE:
        raise InvalidRunQuery(f"limit must be 1-{MAX_STEPS_PAGE}, got {limit}")
    entries = client.store.steps(snap.run_id, args.get("after") or "-", count=limit + 1)
    return steps_view([(e.id, parse(e.record)) for e in entries], limit)


def full_state(client: Client, run_id: str, key: str | None) -> Any:
    """`/api/runs/<id>/state`: the whole state, or the value of one key."""
    state = snapshot(client, run_id).state
    if key is None:
        return state
    if key not in state:
        raise StateKeyNotFound(f"run {run_id} has no state key {key!r}")
    return state[key]


def run_page(client: Client, run_id: str, after: str | None) -> RunPageData:
    """The run page: the run, its graph version drawn with its path, a page of its transcript."""
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
    return RunPageData(run, _inline(svg), notes, steps)


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
    client: Client, body: Mapping[str, Any], granted: Sequence[str], user: str | None
) -> tuple[int, dict[str, Any]]:
    """`POST /api/runs`: 201 for a new run, 202 for one queued behind its concurrency key, 200 for
    a run id submitted before with the same graph and inputs. The run carries the login's
    capabilities `granted` (or the body's narrower `capabilities`); a graph that needs more is
    refused (`SubmitRefused`) before anything is stored."""
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
    handle = client.submit(
        graph, inputs, run_id=run_id, capabilities=capabilities, concurrency_key=key, when_busy=when_busy
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
