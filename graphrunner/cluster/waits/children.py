"""Subgraph nodes on the cluster: the child is a run of its own, linked both ways.

The parent's step is suspended on a `child` wait (the child's id is in the parent's
`children`, the parent's step in the child's `parent`), and no worker waits on the child:
the child's last commit sends the message that wakes the parent's step, which projects the
child's state back (OpenArmature's rules, in `engine.step`) and goes on.
"""

from __future__ import annotations

from graphrunner import engine
from graphrunner.cluster.runs.graphs import GraphCache
from graphrunner.cluster.steps.decisions import Complete, Decision, Idle, Suspend
from graphrunner.cluster.waits.base import Wait
from graphrunner.compiled import CompiledGraph
from graphrunner.engine import ChildOutcome, RunSnapshot, StepPlan
from graphrunner.errors import GraphrunnerError


def child_run_id(snap: RunSnapshot, step: int, phase: int) -> str:
    """`<parent>.<step>`, and `.<phase>` when the step runs its subgraph again."""
    return f"{snap.run_id}.{step}" if phase <= 1 else f"{snap.run_id}.{step}.{phase}"


def first(
    graphs: GraphCache,
    graph: CompiledGraph,
    snap: RunSnapshot,
    plan: StepPlan,
    run_id: str,
    phase: int,
    max_state_bytes: int | None,
) -> tuple[CompiledGraph, RunSnapshot]:
    """The child graph and the child run's first snapshot; raises `GraphrunnerError`."""
    assert plan.child_graph is not None
    child = graphs.child(graph, plan.child_graph)
    inputs, state = child.split_child_values(plan.child_values or {})
    begun = engine.begin(  # exactly the parent's capabilities: a child never widens them
        child,
        inputs,
        run_id=run_id,
        state=state,
        capabilities=snap.capabilities,
        depth=snap.depth + 1,
        max_state_bytes=max_state_bytes,
    )
    parent = {
        "run_id": snap.run_id,
        "step": snap.step,
        "phase": phase,
        "graph_id": snap.graph_id,
        "node": snap.node,
    }
    return child, begun.model_copy(update={"parent": parent})


def start(
    graphs: GraphCache,
    graph: CompiledGraph,
    snap: RunSnapshot,
    plan: StepPlan,
    hook_round: int,
    max_state_bytes: int | None,
) -> Decision:
    """Suspend the parent's step on a new child run, or fail the node if it cannot start."""
    phase = snap.phase + 1
    run_id = child_run_id(snap, plan.step, phase)
    error = engine.too_deep(graph, snap)
    if error is None:
        try:
            first(graphs, graph, snap, plan, run_id, phase, max_state_bytes)
        except GraphrunnerError as exc:
            error = {"type": "node_exception", "message": f"subgraph '{plan.child_graph}': {exc}"}
    if error is not None:
        return Complete(ChildOutcome("failed", error=error), hook_round)
    wait = Wait("child", hook_round=hook_round, child=run_id)
    return Suspend(wait, changes={"children": (*snap.children, run_id)})


def join(snap: RunSnapshot, wait: Wait, child: RunSnapshot | None) -> Decision:
    """The child has woken its parent: go on with its outcome once it has finished."""
    if child is None:
        outcome = ChildOutcome("failed", error={"message": f"child run {wait.child} has vanished"})
        return Complete(outcome, wait.hook_round)
    ended = outcome_of(snap, child)
    if ended is None:
        return Idle()  # a stray wake-up: the child wakes the parent again when it finishes
    return Complete(ended, wait.hook_round)


def outcome_of(snap: RunSnapshot, child: RunSnapshot) -> ChildOutcome | None:
    """How the child run of the parent `snap` ended, or None while it runs. A child whose
    capabilities are not its parent's (a run that took its id) is never trusted: it failed."""
    if not child.status.finished:
        return None
    if child.capabilities != snap.capabilities:
        message = f"child run {child.run_id} has capabilities {list(child.capabilities)}, not its parent's"
        return ChildOutcome("failed", error={"type": "permission_denied", "message": message})
    return ChildOutcome(child.status.value, dict(child.state), child.output, child.error)
