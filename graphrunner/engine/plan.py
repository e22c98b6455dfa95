"""What a step must do before the engine can complete it: the pure first half of a step."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from graphrunner import namespaces as ns
from graphrunner.compiled import CompiledGraph, CompiledNode
from graphrunner.engine.calls import ActionCall
from graphrunner.engine.capabilities import denied
from graphrunner.engine.outcomes import ActionFailure
from graphrunner.engine.snapshot import RunSnapshot
from graphrunner.errors import ExpressionError
from graphrunner.limits import NESTING, NON_FINITE, finite_copy, value_problem
from graphrunner.model import (
    DEFAULT_RETRY,
    ActionNode,
    ForeachNode,
    GateNode,
    PauseNode,
    ReturnNode,
)
from graphrunner.model.nodes import ParallelNode, SubgraphNode


@dataclass(frozen=True)
class BranchStart:
    """One branch of a parallel step: the child run of `graph` to start with `values` projected in."""

    name: str
    graph: str
    values: dict[str, Any]


@dataclass(frozen=True)
class StepPlan:
    """The step about to be taken: its kind and the I/O the runner must do for it."""

    node: str
    step: int
    kind: str  # action | gate | foreach | subgraph | parallel | pause | return | limit
    call: ActionCall | None = None
    items: tuple[Any, ...] | None = None
    child_graph: str | None = None
    child_values: dict[str, Any] | None = None
    branches: tuple[BranchStart, ...] = ()
    failure: ActionFailure | None = None


def eval_context(snap: RunSnapshot, now: datetime, **extra: Any) -> dict[str, Any]:
    """The expression context of the current step."""
    return ns.context(state=snap.state, inputs=snap.inputs, run=snap.run_namespace(), now=now, **extra)


def prepare(graph: CompiledGraph, snap: RunSnapshot, now: datetime) -> StepPlan:
    """Plan the step at `snap.node`: interpolate the action, resolve foreach items, check limits."""
    assert snap.node is not None, "prepare() needs a run that is at a node"
    step = snap.step + 1
    if snap.step >= graph.spec.config.max_steps:
        return StepPlan(snap.node, step, "limit")
    node = graph.nodes[snap.node]
    spec = node.spec
    if isinstance(spec, ActionNode):
        return _action_plan(graph, node, snap, step, now)
    if isinstance(spec, ForeachNode):
        return _foreach_plan(node, spec, snap, step, now)
    if isinstance(spec, SubgraphNode):
        return _subgraph_plan(node, spec, snap, step, now)
    if isinstance(spec, ParallelNode):
        return _parallel_plan(node, spec, snap, step, now)
    kind = {GateNode: "gate", PauseNode: "pause", ReturnNode: "return"}[type(spec)]
    return StepPlan(snap.node, step, kind)


def _action_plan(
    graph: CompiledGraph, node: CompiledNode, snap: RunSnapshot, step: int, now: datetime
) -> StepPlan:
    try:
        call = build_call(node, node.params.render(eval_context(snap, now)))
    except ExpressionError as exc:
        return StepPlan(node.name, step, "action", failure=_bad_params(node.name, exc))
    if isinstance(call, ActionFailure):
        return StepPlan(node.name, step, "action", failure=call)
    failure = denied(snap.capabilities, call, permissions=node.permissions)
    return StepPlan(node.name, step, "action", call=call, failure=failure)


def build_call(node: CompiledNode, params: Any, item_index: int | None = None) -> ActionCall | ActionFailure:
    """The dispatch of `node` with rendered params (null-valued params dropped), or why the params
    cannot be sent: a NaN or ±Infinity an expression made, a value nested past the nesting limit."""
    spec = node.spec
    assert isinstance(spec, ActionNode | ForeachNode) and spec.action is not None
    clean = {k: v for k, v in params.items() if v is not None} if isinstance(params, dict) else {}
    found = value_problem(clean)
    if found is not None and found.category == NON_FINITE and node.non_finite == "null":
        clean, found = finite_copy(clean), None
    if found is not None and found.category in (NON_FINITE, NESTING):
        item = "" if item_index is None else f" (item {item_index})"
        message = f"node '{node.name}'{item}: {found.describe('params')}"
        return ActionFailure(found.category, message, "BadParams")
    return ActionCall(
        node=node.name,
        tool=spec.action.tool,
        params=clean,
        timeout=spec.timeout,
        retry=spec.retry if spec.retry is not None else DEFAULT_RETRY,
        cache=spec.cache_result,
        queue=spec.queue,
        item_index=item_index,
        rye=node.rye,
        non_finite=node.non_finite,
    )


def item_call(
    node: CompiledNode, snap: RunSnapshot, index: int, item: Any, now: datetime
) -> ActionCall | ActionFailure:
    """The dispatch for one foreach item, or why it cannot be made."""
    spec = node.spec
    assert isinstance(spec, ForeachNode)
    try:
        params = node.params.render(eval_context(snap, now, **{spec.as_: item, "index": index}))
    except ExpressionError as exc:
        return _bad_params(node.name, exc)
    call = build_call(node, params, index)
    if isinstance(call, ActionFailure):
        return call
    return denied(snap.capabilities, call, permissions=node.permissions) or call


def _foreach_plan(
    node: CompiledNode, spec: ForeachNode, snap: RunSnapshot, step: int, now: datetime
) -> StepPlan:
    assert node.over is not None
    try:
        items = node.over.render(eval_context(snap, now))
    except ExpressionError as exc:
        return StepPlan(node.name, step, "foreach", failure=_bad_params(node.name, exc, "over"))
    if not isinstance(items, list | tuple):
        failure = ActionFailure(
            "validation",
            f"node '{node.name}': over must resolve to a list, got {type(items).__name__} {items!r:.80}",
            "BadForeach",
        )
        return StepPlan(node.name, step, "foreach", failure=failure)
    if spec.graph is None:
        return StepPlan(node.name, step, "foreach", items=tuple(items))
    refused = denied(snap.capabilities, None, graph_id=spec.graph, permissions=node.permissions)
    return StepPlan(node.name, step, "foreach", items=tuple(items), child_graph=spec.graph, failure=refused)


def item_child(
    node: CompiledNode, snap: RunSnapshot, index: int, item: Any, now: datetime
) -> dict[str, Any] | ActionFailure:
    """The values projected into the child run of one item of a foreach over a graph."""
    spec = node.spec
    assert isinstance(spec, ForeachNode)
    ctx = eval_context(snap, now, **{spec.as_: item, "index": index})
    try:
        return {k: t.render(ctx) for k, t in node.child_inputs.items()}
    except ExpressionError as exc:
        return _bad_params(node.name, exc, f"inputs (item {index})")


def _subgraph_plan(
    node: CompiledNode, spec: SubgraphNode, snap: RunSnapshot, step: int, now: datetime
) -> StepPlan:
    ctx = eval_context(snap, now)
    try:
        values = {k: t.render(ctx) for k, t in node.child_inputs.items()}
    except ExpressionError as exc:
        return StepPlan(node.name, step, "subgraph", failure=_bad_params(node.name, exc, "inputs"))
    failure = denied(snap.capabilities, None, graph_id=spec.graph, permissions=node.permissions)
    return StepPlan(node.name, step, "subgraph", child_graph=spec.graph, child_values=values, failure=failure)


def _parallel_plan(
    node: CompiledNode, spec: ParallelNode, snap: RunSnapshot, step: int, now: datetime
) -> StepPlan:
    ctx = eval_context(snap, now)
    starts = []
    for name, branch in spec.branches.items():
        try:
            values = {k: t.render(ctx) for k, t in node.branch_inputs[name].items()}
        except ExpressionError as exc:
            failure = _bad_params(node.name, exc, f"branches.{name}.inputs")
            return StepPlan(node.name, step, "parallel", failure=failure)
        refused = denied(snap.capabilities, None, graph_id=branch.graph, permissions=node.permissions)
        if refused is not None:
            return StepPlan(node.name, step, "parallel", failure=refused)
        starts.append(BranchStart(name, branch.graph, values))
    return StepPlan(node.name, step, "parallel", branches=tuple(starts))


def _bad_params(node: str, exc: ExpressionError, what: str = "params") -> ActionFailure:
    return ActionFailure("validation", f"node '{node}': {what}: {exc}", "ExpressionError")
