"""A run read from a cluster's store for drawing (`graphrunner render --run`, the run explorer):
its trace and the graph version it is pinned to.

The run's own stored graph version is what it runs, so that is what is drawn; a graph given by
the caller is drawn only when that version is no longer in the store.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graphrunner.errors import GraphNotFound, GraphValidationError
from graphrunner.loading import parse_spec
from graphrunner.model import GraphSpec
from graphrunner.render.trace import MAX_RECORDS, RunTrace
from graphrunner.services.records import AnyRecord, parse

if TYPE_CHECKING:
    from graphrunner.client import Client
    from graphrunner.engine import RunSnapshot
    from graphrunner.store import Store

PAGE = 1000  # transcript records read per round trip


@dataclass(frozen=True)
class StoredRun:
    """What drawing a stored run needs: the graph to draw, the run's trace, and warnings."""

    spec: GraphSpec
    trace: RunTrace
    warnings: tuple[str, ...] = ()


def read_run(
    client: Client, run_id: str, graph: GraphSpec | None = None, *, max_records: int = MAX_RECORDS
) -> StoredRun:
    """Run `run_id` and its graph version from the store; `graph` stands in if that version is gone.

    Raises `InvalidRunId`, `RunNotFound`, and `GraphNotFound` when `graph` is another graph
    than the run's, or when the run's version is gone and no `graph` was given.
    """
    from graphrunner.client import RunHandle
    from graphrunner.cluster.runs.ids import check_run_id

    snap = RunHandle(client, check_run_id(run_id)).snapshot()
    if graph is not None and graph.id != snap.graph_id:
        raise GraphNotFound(
            f"run {snap.run_id} is a run of graph '{snap.graph_id}', not of graph '{graph.id}': "
            f"give that graph, or --run alone to draw the version the run is pinned to"
        )
    trace = RunTrace.of_snapshot(snap, transcript(client.store, snap.run_id), max_records)
    stored = stored_spec(client.store, snap)
    if stored is not None:
        differs = graph is not None and graph != stored
        note = (f"the graph given is not the version run {snap.run_id} runs: the run's version is drawn",)
        return StoredRun(stored, trace, note if differs else ())
    if graph is None:
        raise GraphNotFound(
            f"run {snap.run_id} is pinned to version {_short(snap)} of graph '{snap.graph_id}', "
            "which is no longer in the store: give the graph to draw the run on it "
            f"(graphrunner render GRAPH --run {snap.run_id})"
        )
    note = (
        f"version {_short(snap)} of graph '{snap.graph_id}' that run {snap.run_id} runs is no longer "
        "in the store: the graph given is drawn, and may differ from what the run ran",
    )
    return StoredRun(graph, trace, note)


def stored_spec(store: Store, snap: RunSnapshot) -> GraphSpec | None:
    """The graph model of the version `snap` is pinned to, or None when the store no longer has it."""
    stored = store.load_graph(snap.graph_hash) if snap.graph_hash else None
    if stored is None:
        return None
    try:
        return parse_spec(str(stored["text"]), stored.get("file"), stored.get("id"))
    except GraphValidationError as exc:  # written by an older graphrunner that read it otherwise
        raise GraphNotFound(
            f"the stored version {_short(snap)} of graph '{snap.graph_id}' no longer loads: {exc}"
        ) from None


def transcript(store: Store, run_id: str) -> Iterator[AnyRecord]:
    """A run's transcript records, read a page at a time as they are consumed."""
    after = "-"
    while True:
        entries = store.steps(run_id, after, count=PAGE)
        for entry in entries:
            yield parse(entry.record)
        if len(entries) < PAGE:
            return
        after = entries[-1].id


def _short(snap: RunSnapshot) -> str:
    return snap.graph_hash[:12] or "(unrecorded)"
