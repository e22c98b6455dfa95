"""Forking a run: a new run from the state after one of its steps, with a patch.

The fork starts after the chosen step: at the node that step led to, with the state the step
left plus the patch, at that step's count (so `max_steps` counts as in the origin), on the graph
version that step ran on unless upgraded. Nothing the origin did up to that step runs again.
What each kind of step means to fork from:
- `start` (step 0, or a fork's own first entry): the run's first node, as a new submit would;
- `ok`: the node the step routed to (after a foreach, all its items are done; after a subgraph
  or parallel branches, their child runs are done: none of them runs again);
- `paused` (a pause node): past the pause, routed as a resume is, with the patch in the state;
- `error` (the run failed there): the failed node again, as a resume runs it;
- `end` (the run ended there): nothing runs after it, a `ForkError`.
A fork has no parent (a child run forked is a run of its own) and no concurrency key.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from graphrunner import engine
from graphrunner.cluster.runs import history
from graphrunner.cluster.runs.ids import check_run_id, fingerprint
from graphrunner.compiled import CompiledGraph
from graphrunner.engine import RunSnapshot, RunStatus
from graphrunner.engine.failures import ForkLink
from graphrunner.engine.state import as_mapping, check_state
from graphrunner.errors import ForkError, ResumeError, RunConflict
from graphrunner.limits import check_size
from graphrunner.services.records import utcnow
from graphrunner.store import existing_run
from graphrunner.telemetry import propagation

if TYPE_CHECKING:
    from graphrunner.cluster.runs.context import Cluster
    from graphrunner.graph import Graph


def fork(
    cluster: Cluster,
    run_id: str,
    step: int,
    patch: Mapping[str, Any] | None = None,
    *,
    upgrade: Graph | None = None,
    new_id: str | None = None,
) -> RunSnapshot:
    """Start a new run from the state after step `step` of run `run_id`, with `patch` set in it.

    Raises `RunNotFound`, `HistoryUnavailable` (that step's state is not kept), `ForkError` (the
    step ended the run, a bad patch or upgrade), `StateValidationError` (a patch the schema
    refuses), or `RunConflict` (`new_id` is another run's); nothing is written then.
    """
    if patch is not None and not isinstance(patch, Mapping):
        raise ForkError(f"a state patch must be a mapping of field to value, got {type(patch).__name__}")
    origin = existing_run(cluster.store, run_id)
    entry = history.read(cluster.store, run_id, origin).at(step)
    graph = cluster.graphs.get(entry.graph_hash or origin.graph_hash)
    if upgrade is not None:
        graph = _re_pin(cluster, origin, entry, upgrade)
    new_id = check_run_id(new_id) if new_id is not None else uuid.uuid4().hex
    snap = _started(graph, origin, entry, patch or {}, cluster.settings.max_state_bytes)
    snap = snap.model_copy(
        update={
            "run_id": new_id,
            "forked_from": ForkLink(run_id=run_id, step=entry.step),
            "trace": propagation.at_submit(new_id),
        }
    )
    identity = fingerprint(graph, snap.inputs, snap.capabilities, state=snap.state)
    created = cluster.create_run(snap, graph, identity)
    if not created.created and created.existing_fingerprint != identity:
        raise RunConflict(f"run {new_id} already exists (another run, or another fork)")
    return snap


def _started(
    graph: CompiledGraph,
    origin: RunSnapshot,
    entry: history.HistoryEntry,
    patch: Mapping[str, Any],
    max_bytes: int | None,
) -> RunSnapshot:
    """The fork's first snapshot: after step `entry`, at the node it led to, with the patch."""
    where = f"run {origin.run_id} step {entry.step}"
    if entry.status == "end":
        raise ForkError(
            f"{where} ended the run ({entry.node}): nothing runs after it; fork from an earlier step"
        )
    base = RunSnapshot(
        run_id=origin.run_id,
        graph_id=origin.graph_id,
        graph_hash=graph.content_hash,
        inputs=origin.inputs,
        state=entry.state,
        step=entry.step,
        depth=origin.depth,
        capabilities=origin.capabilities,
    )
    if entry.status == "paused":
        paused = base.model_copy(update={"node": entry.node, "status": RunStatus.PAUSED})
        try:
            resumed = engine.resume(graph, paused, utcnow(), patch, max_state_bytes=max_bytes)
        except ResumeError as exc:
            raise ForkError(f"{where}: {exc}") from exc
        if resumed.status is not RunStatus.RUNNING:
            raise ForkError(f"{where} paused at the last node: nothing runs after it")
        return resumed
    node = entry.next_node if entry.status != "error" or entry.next_node else entry.node
    if node is None or node not in graph.nodes:
        raise ForkError(f"{where} led to no node of graph {graph.id} ({node!r}): nothing to start at")
    state = {**entry.state, **as_mapping(patch, "the state patch")}
    check_state(graph.spec, state, "fork")
    check_size(state, max_bytes, f"the state of the fork of {where} with the patch")
    return base.model_copy(update={"node": node, "state": state})


def _re_pin(
    cluster: Cluster, origin: RunSnapshot, entry: history.HistoryEntry, graph: Graph
) -> CompiledGraph:
    """Check that `graph` (another version of the origin's graph) can take the fork over."""
    if graph.id != origin.graph_id:
        raise ForkError(
            f"cannot fork run {origin.run_id} of graph {origin.graph_id!r} onto graph {graph.id!r}"
        )
    node = entry.node if entry.status in ("paused", "error") else entry.next_node
    if node is not None and node not in graph.nodes:
        known = ", ".join(sorted(graph.nodes))
        raise ForkError(
            f"cannot fork run {origin.run_id} at step {entry.step} onto this version of {graph.id}: "
            f"node {node!r} is not in it (nodes: {known})"
        )
    cluster.graphs.put(graph)
    return graph
