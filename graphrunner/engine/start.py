"""Starting and resuming runs: pure functions from a graph to a snapshot."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from graphrunner.compiled import CompiledGraph
from graphrunner.engine.capabilities import checked
from graphrunner.engine.failures import RunFailure
from graphrunner.engine.plan import eval_context
from graphrunner.engine.routing import route
from graphrunner.engine.snapshot import RunSnapshot, RunStatus
from graphrunner.engine.state import as_mapping, check_inputs, check_state, initial_state
from graphrunner.errors import ResumeError, RunError, UnknownNode
from graphrunner.limits import check_size
from graphrunner.model import PauseNode


def begin(
    graph: CompiledGraph,
    inputs: Mapping[str, Any] | None,
    *,
    run_id: str,
    state: Mapping[str, Any] | None = None,
    capabilities: Sequence[str] = ("*",),
    depth: int = 0,
    max_state_bytes: int | None = None,
    start: str | None = None,
) -> RunSnapshot:
    """The snapshot of a new run at the entry node (or at node `start`: a saved history's step).

    Raises `InvalidCapabilities`, `StateValidationError` for bad inputs or state, `UnknownNode`
    for a `start` the graph has not, and `LimitExceeded` when inputs or initial state are over
    `max_state_bytes`.
    """
    if start is not None and start not in graph.nodes:
        known = ", ".join(sorted(graph.nodes))
        raise UnknownNode(f"graph '{graph.id}' has no node {start!r} to start at (nodes: {known})")
    caps = checked(capabilities)
    valid_inputs = check_inputs(graph.spec, inputs)
    check_size(valid_inputs, max_state_bytes, f"the inputs of graph '{graph.id}'")
    first = initial_state(graph.spec, state)
    if graph.spec.rye:  # the walker seeds its state with the inputs: `state.inputs.x`
        first.setdefault("inputs", copy.deepcopy(valid_inputs))
    check_state(graph.spec, first, "the start of the run")
    check_size(first, max_state_bytes, f"the initial state of graph '{graph.id}'")
    assert graph.spec.config.start is not None
    return RunSnapshot(
        run_id=run_id,
        graph_id=graph.id,
        graph_hash=graph.content_hash,
        inputs=valid_inputs,
        state=first,
        node=start or graph.spec.config.start,
        capabilities=caps,
        depth=depth,
    )


def missing_env(graph: CompiledGraph, environ: Mapping[str, str] | None = None) -> list[str]:
    """`env_requires` entries (graph and nodes) not set in the environment, with where."""
    env = os.environ if environ is None else environ
    wanted = [(v, "config.env_requires") for v in graph.spec.config.env_requires]
    for name, node in graph.spec.nodes.items():
        wanted += [(v, f"node '{name}'") for v in getattr(node, "env_requires", ())]
    return [f"{var} ({where})" for var, where in wanted if var not in env]


def too_deep(graph: CompiledGraph, snap: RunSnapshot) -> RunFailure | None:
    """The `limit_exceeded` error when a subgraph of this run would nest deeper than `max_depth`."""
    limit = graph.spec.config.max_depth
    if snap.depth + 1 <= limit:
        return None
    return RunFailure(
        type="limit_exceeded",
        message=f"subgraph nesting deeper than max_depth {limit} (this run is at depth {snap.depth})",
    )


RESUMABLE = {RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.PAUSED, RunStatus.RUNNING}


def resume(
    graph: CompiledGraph,
    snap: RunSnapshot,
    now: datetime,
    patch: Mapping[str, Any] | None = None,
    *,
    max_state_bytes: int | None = None,
) -> RunSnapshot:
    """Continue a failed, cancelled or paused run at its current node, with `patch` set in state.

    The run keeps its capabilities: a resume never changes (let alone widens) them.
    """
    if snap.status not in RESUMABLE or snap.node is None:
        raise ResumeError(f"run {snap.run_id} is {snap.status.value} and cannot be resumed")
    state = {**snap.state, **as_mapping(patch, "the state patch")}
    check_state(graph.spec, state, "resume")
    if patch:
        check_size(state, max_state_bytes, f"the state of run {snap.run_id} with the patch")
    resumed = snap.model_copy(
        update={
            "state": state,
            "status": RunStatus.RUNNING,
            "error": None,
            "pause_message": None,
            "paused_at": None,
        }
    )
    node = graph.nodes[snap.node]
    if snap.status is RunStatus.PAUSED and isinstance(node.spec, PauseNode):
        try:
            target = route(node.next, eval_context(resumed, now), graph.nodes, snap.node)
        except RunError as exc:
            raise ResumeError(f"run {snap.run_id}: routing after pause failed: {exc}") from exc
        if target is None:
            status = RunStatus.COMPLETED_WITH_ERRORS if snap.errors else RunStatus.COMPLETED
            return resumed.model_copy(update={"node": None, "status": status, "output": state})
        return resumed.model_copy(update={"node": target})
    return resumed
