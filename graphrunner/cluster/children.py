"""Subgraph nodes on the cluster: the child is a run of its own, linked both ways.

The parent's step is suspended on a `child` wait (the child's id is in the parent's
`children`, the parent's step in the child's `parent`), and no worker waits on the child:
when the child finishes, its last step wakes the parent's step, which projects the
child's state back (OpenArmature's rules, in `engine.step`) and goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from graphrunner import engine
from graphrunner.cluster.runs import fingerprint
from graphrunner.cluster.waits import Wait
from graphrunner.engine import ChildOutcome, RunSnapshot, StepPlan
from graphrunner.errors import GraphrunnerError
from graphrunner.graph import Graph
from graphrunner.runner.local import utcnow

if TYPE_CHECKING:
    from graphrunner.cluster.executor import StepExecutor


def child_run_id(snap: RunSnapshot, step: int, phase: int) -> str:
    """`<parent>.<step>`, and `.<phase>` when the step runs its subgraph again."""
    return f"{snap.run_id}.{step}" if phase <= 1 else f"{snap.run_id}.{step}.{phase}"


def child_snapshot(
    ex: StepExecutor, graph: Graph, snap: RunSnapshot, plan: StepPlan, run_id: str, phase: int
) -> tuple[Graph, RunSnapshot]:
    """The child graph and the child run's first snapshot; raises `GraphrunnerError`."""
    assert plan.child_graph is not None
    child = ex.graphs.child(graph, plan.child_graph)
    inputs, state = child.split_child_values(plan.child_values or {})
    first = engine.begin(  # exactly the parent's capabilities: a child never widens them
        child,
        inputs,
        run_id=run_id,
        state=state,
        capabilities=snap.capabilities,
        depth=snap.depth + 1,
        max_state_bytes=ex.runner.max_state_bytes,
    )
    parent = {"run_id": snap.run_id, "step": snap.step, "phase": phase}
    return child, first.model_copy(update={"parent": parent})


async def start(ex: StepExecutor, graph: Graph, snap: RunSnapshot, plan: StepPlan, hook_round: int) -> str:
    """Suspend the parent's step on a new child run, or fail the node if it cannot start."""
    phase = snap.phase + 1
    run_id = child_run_id(snap, plan.step, phase)
    error = engine.too_deep(graph, snap)
    if error is None:
        try:
            child_snapshot(ex, graph, snap, plan, run_id, phase)
        except GraphrunnerError as exc:
            error = {"type": "node_exception", "message": f"subgraph '{plan.child_graph}': {exc}"}
    if error is not None:
        return await ex.finish(graph, snap, plan, ChildOutcome("failed", error=error), hook_round)
    wait = Wait("child", hook_round=hook_round, child=run_id)
    return ex.suspend_and_send(graph, snap, wait, children=(*snap.children, run_id))


def send(ex: StepExecutor, graph: Graph, snap: RunSnapshot, wait: Wait) -> None:
    """Create the child run (once: creating it again finds it) and send its first step."""
    plan = engine.prepare(graph, snap, utcnow())
    child, first = child_snapshot(ex, graph, snap, plan, wait.child, snap.phase)
    ex.store.create_run(first, fingerprint(child, first.inputs, first.capabilities))
    current = ex.store.load_run(wait.child)
    if current is not None and current.step == 0 and current.phase == 0:
        ex.sender.enqueue(current, child)


async def join(ex: StepExecutor, graph: Graph, snap: RunSnapshot, plan: StepPlan, wait: Wait) -> str:
    """The child has woken its parent: go on with its outcome once it has finished."""
    child = ex.store.load_run(wait.child)
    if child is None:
        outcome = ChildOutcome("failed", error={"message": f"child run {wait.child} has vanished"})
    elif not child.status.finished:
        return "waiting"  # a stray wake-up: the child wakes the parent again when it finishes
    elif child.capabilities != snap.capabilities:  # a run that took the child's id: never trusted
        message = f"child run {wait.child} has capabilities {list(child.capabilities)}, not its parent's"
        outcome = ChildOutcome("failed", error={"type": "permission_denied", "message": message})
    else:
        outcome = ChildOutcome(child.status.value, dict(child.state), child.output, child.error)
    return await ex.finish(graph, snap, plan, outcome, wait.hook_round)
