"""Child runs: their ids, their first snapshots linked to the parent's step, how one ended.

A step that runs graphs (a subgraph node, a parallel node's branches, a foreach over a graph:
the `children` wait kind, `cluster/waits/children.py`) starts child runs: each a run of its own
whose `parent` names the step and phase that wait for it, with its parent's capabilities or
fewer (a node's `capabilities`, `graphrunner.engine.grants`). Ids: `<run>.<step>` (and
`.<phase>` when the step runs its subgraph again) for a subgraph's child; `<base>.<key>` for a
keyed one, `<base>` made unique when the step ran before.
A child whose capabilities are more than its parent's (a run that took its id) is never trusted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from graphrunner import engine
from graphrunner.cluster.runs.graphs import GraphCache
from graphrunner.compiled import CompiledGraph
from graphrunner.engine import ActionFailure, ChildOutcome, RunSnapshot, StepPlan
from graphrunner.engine.failures import ParentLink, RunFailure
from graphrunner.engine.grants import child_grants, narrows
from graphrunner.errors import RunError
from graphrunner.services.records import utcnow
from graphrunner.store import Store
from graphrunner.telemetry import propagation


def child_run_id(snap: RunSnapshot, step: int, phase: int) -> str:
    """`<parent>.<step>`, and `.<phase>` when the step runs its subgraph again."""
    return f"{snap.run_id}.{step}" if phase <= 1 else f"{snap.run_id}.{step}.{phase}"


def base_id(snap: RunSnapshot, step: int) -> str:
    """The id prefix of this step's children: `<run>.<step>`, made unique when the step ran before."""
    base = child_run_id(snap, step, snap.phase + 1)
    return base if base not in snap.children else f"{base}.r{len(snap.children)}"


def first(
    graphs: GraphCache,
    graph: CompiledGraph,
    snap: RunSnapshot,
    plan: StepPlan,
    run_id: str,
    phase: int,
    max_state_bytes: int | None,
    label: Mapping[str, Any] | None = None,
) -> tuple[CompiledGraph, RunSnapshot]:
    """The child graph and the first snapshot of child run `run_id` of the subgraph `plan`, linked
    to the step of `snap` at `phase` (`label`: its branch or item index, for its trace); raises
    `GraphrunnerError`."""
    label = label or {}
    assert plan.child_graph is not None
    child = graphs.child(graph, plan.child_graph)
    inputs, state = child.split_child_values(plan.child_values or {})
    grants = child_grants(graph, snap)
    if isinstance(grants, RunFailure):  # checked before any child is opened (`Children.start`)
        raise RunError(grants.message)
    begun = engine.begin(  # the parent's capabilities or fewer: a child never widens them
        child,
        inputs,
        run_id=run_id,
        state=state,
        capabilities=grants.capabilities,
        depth=snap.depth + 1,
        max_state_bytes=max_state_bytes,
    )
    parent = ParentLink(
        run_id=snap.run_id, step=snap.step, phase=phase, graph_id=snap.graph_id, node=snap.node
    )
    trace = propagation.of_child(snap.trace, parent, branch=label.get("branch"), index=label.get("index"))
    return child, begun.model_copy(update={"parent": parent, "trace": trace, "max_depth": grants.max_depth})


def first_of(
    graphs: GraphCache,
    graph: CompiledGraph,
    snap: RunSnapshot,
    plan: StepPlan,
    run_id: str,
    key: str,
    limit: int | None,
) -> tuple[CompiledGraph, RunSnapshot]:
    """Child `key`'s graph and first snapshot (a branch name, an item index, or "" for a subgraph's
    one child), linked to the step of `snap` at its phase (the phase that waits for it); raises
    `GraphrunnerError`, or `ValueError` when its inputs fail."""
    label: dict[str, Any] = {}
    if plan.kind == "parallel":
        label["branch"] = key
        branch = next(b for b in plan.branches if b.name == key)
        plan = StepPlan(
            plan.node, plan.step, "subgraph", child_graph=branch.graph, child_values=branch.values
        )
    elif plan.kind == "foreach":
        assert plan.items is not None and plan.child_graph is not None
        index = label["index"] = int(key)
        values = engine.item_child(graph.nodes[plan.node], snap, index, plan.items[index], utcnow())
        if isinstance(values, ActionFailure):
            raise ValueError(values.message)
        plan = StepPlan(plan.node, plan.step, "subgraph", child_graph=plan.child_graph, child_values=values)
    return first(graphs, graph, snap, plan, run_id, snap.phase, limit, label)


def ends(store: Store, snap: RunSnapshot, run_ids: Sequence[str]) -> list[ChildOutcome | None]:
    """How each child run ended (None while it runs, or is not created yet), read in one round trip."""
    return [None if kid is None else outcome_of(snap, kid) for kid in store.load_runs(run_ids)]


def outcome_of(snap: RunSnapshot, child: RunSnapshot) -> ChildOutcome | None:
    """How the child run of the parent `snap` ended, or None while it runs. A child whose
    capabilities are more than its parent's (a run that took its id) is never trusted: it failed."""
    if not child.status.finished:
        return None
    if not narrows(child.capabilities, snap.capabilities):
        message = (
            f"child run {child.run_id} has capabilities {list(child.capabilities)}, more than its parent's"
        )
        return ChildOutcome("failed", error=RunFailure(type="permission_denied", message=message))
    return ChildOutcome(child.status.value, dict(child.state), child.output, child.error)


def completed_same(store: Store, snap: RunSnapshot, run_id: str, first: RunSnapshot) -> bool:
    """True when `run_id`, a kid of an earlier attempt of this step, completed and would run the
    same graph with the same inputs now: it is kept instead of run again."""
    kid = store.load_run(run_id)
    if kid is None or kid.parent is None or kid.parent.run_id != snap.run_id:
        return False
    if (kid.graph_hash, kid.inputs) != (first.graph_hash, first.inputs):
        return False
    ended = outcome_of(snap, kid)
    return ended is not None and ended.ok
