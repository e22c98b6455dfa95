"""The pure second half of a step: given what the action did, the update, state and next node.

The shared moves (merge, route, end, fail) are `stepping`; what a node that ran items, a child
run or branches makes of them is `fan_in`.

`complete` merges the node's update through the reducers, routes against the post-update
state, and applies the error handling of DESIGN §2.5 (hook answer, `_last_error`,
`on_error`, `error_mode`). It does no I/O; `now` is passed in.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from graphrunner.compiled import CompiledGraph
from graphrunner.engine.fan_in import after_child, after_foreach, after_parallel
from graphrunner.engine.outcomes import (
    ActionOutcome,
    ChildOutcome,
    ForeachOutcome,
    Outcome,
    ParallelOutcome,
)
from graphrunner.engine.plan import StepPlan
from graphrunner.engine.snapshot import RunSnapshot, RunStatus, StepEvent
from graphrunner.engine.stepping import (
    StepContext,
    StepResult,
    at,
    changed,
    end,
    fail,
    merge,
    namespace,
    on_failure,
    succeed,
)
from graphrunner.errors import RUN_ERROR_CLASSES, ExpressionError, LimitExceeded, NodeError, RunError
from graphrunner.expressions.rendering import render_text
from graphrunner.limits import NON_FINITE, check_step_state, fields_problem, finite_copy
from graphrunner.model import FIELD_NAME, PauseNode, ReturnNode


def complete(
    graph: CompiledGraph,
    snap: RunSnapshot,
    plan: StepPlan,
    outcome: Outcome,
    now: datetime,
    *,
    max_state_bytes: int | None = None,
) -> StepResult:
    """Finish the planned step with the runner's outcome; never raises for run errors.

    A step whose new state would be over `max_state_bytes` (JSON-encoded) fails the run
    with `limit_exceeded` instead, and the state stays what it was before the step.
    """
    result = _complete(graph, snap, plan, outcome, now)
    if result.snapshot.state is snap.state:
        return result
    check = check_step_state(result.snapshot.state, max_state_bytes, result.event.changed_keys)
    if check.category == NON_FINITE and graph.spec.config.non_finite == "null":
        result = _nulled(result)
        check = check_step_state(result.snapshot.state, max_state_bytes, result.event.changed_keys)
    if check.problem is None:
        return replace(result, sizes=check.sizes)
    err = RUN_ERROR_CLASSES.get(check.category, LimitExceeded)(
        f"node '{plan.node}' {check.problem}; the state is kept as it was before the node",
        node=plan.node,
        step=plan.step,
        state=snap.state,
    )
    return fail(snap, plan, err, result.event.attempts)


def _nulled(result: StepResult) -> StepResult:
    """`result` with NaN and ±Infinity in the changed state values as null (`non_finite: "null"`)."""
    state = dict(result.snapshot.state)
    for key in result.event.changed_keys:
        if key in state:
            state[key] = finite_copy(state[key])
    return replace(result, snapshot=result.snapshot.model_copy(update={"state": state}))


def _complete(
    graph: CompiledGraph, snap: RunSnapshot, plan: StepPlan, outcome: Outcome, now: datetime
) -> StepResult:
    if plan.kind == "limit":
        limit = graph.spec.config.max_steps
        err = LimitExceeded(
            f"max_steps {limit} reached before node '{plan.node}'",
            node=plan.node,
            step=plan.step,
            state=snap.state,
        )
        return fail(snap, plan, err, attempts=0)
    s = StepContext(graph, snap, plan, graph.nodes[plan.node], now)
    control = getattr(outcome, "control", None)
    if plan.failure is not None:
        return on_failure(s, plan.failure, 1, control)
    if isinstance(outcome, ActionOutcome):
        if outcome.failure is not None:
            return on_failure(s, outcome.failure, outcome.attempts, control)
        return _after_action(s, outcome)
    if isinstance(outcome, ForeachOutcome):
        return after_foreach(s, outcome)
    if isinstance(outcome, ChildOutcome):
        return after_child(s, outcome)
    if isinstance(outcome, ParallelOutcome):
        return after_parallel(s, outcome)
    return _after_plain(s)


def _after_action(s: StepContext, outcome: ActionOutcome) -> StepResult:
    result = outcome.result
    key: str | None = getattr(s.node.spec, "result_key", None)
    extra = {key: result} if key else {}
    if getattr(s.node.spec, "assign_result", False):
        try:
            extra = {**_result_update(s, result, extra), **extra}
        except RunError as exc:
            return fail(s.snap, s.plan, at(exc, s, s.snap.state), outcome.attempts)
    return succeed(s, namespace(result), extra, outcome.attempts, outcome.cache_hit)


def _result_update(s: StepContext, result: Any, extra: dict[str, Any]) -> dict[str, Any]:
    """`assign_result`: the result mapping as a partial update; raises `NodeError` when it is not one."""
    name = s.node.name
    if not isinstance(result, dict):
        raise NodeError(
            f"node '{name}': assign_result needs the action to return a mapping of state fields "
            f"(a partial update), got {type(result).__name__} {result!r:.60}",
            node=name,
        )
    bad = [k for k in result if not isinstance(k, str) or not FIELD_NAME.match(k)]
    if bad:
        raise NodeError(f"node '{name}': the update names invalid state fields {bad!r:.80}", node=name)
    twice = sorted(set(result) & (set(extra) | set(s.node.assign)))
    if twice:
        raise NodeError(
            f"node '{name}' writes field(s) {', '.join(twice)} twice in one update "
            "(assign_result and assign or result_key)",
            node=name,
        )
    return dict(result)


def _after_plain(s: StepContext) -> StepResult:
    spec = s.node.spec
    if isinstance(spec, ReturnNode):
        return _return(s)
    if isinstance(spec, PauseNode):
        return _pause(s)
    return succeed(s, None, {}, 1, False)


def _return(s: StepContext) -> StepResult:
    try:
        update, merged = merge(s, None, {})
        node = s.node
        output = node.output.render(s.context(merged)) if node.output is not None else merged
    except ExpressionError as exc:
        return fail(
            s.snap,
            s.plan,
            at(NodeError(f"node '{s.node.name}': output: {exc}"), s, s.snap.state),
            1,
        )
    except RunError as exc:
        return fail(s.snap, s.plan, at(exc, s, s.snap.state), 1)
    found = fields_problem(output) if s.node.output is not None else None
    if found is not None and found.category == NON_FINITE and s.node.non_finite == "null":
        output, found = finite_copy(output), None
    if found is not None:
        error = RUN_ERROR_CLASSES.get(found.category, NodeError)
        message = f"node '{s.node.name}': {found.describe('output')}"
        return fail(s.snap, s.plan, at(error(message), s, s.snap.state), 1)
    snap = s.snap.model_copy(
        update={"state": merged, "step": s.plan.step, "path": (*s.snap.path, s.node.name)}
    )
    event = StepEvent(
        step=s.plan.step,
        node=s.node.name,
        status="end",
        changed_keys=changed(s.snap.state, merged, update),
    )
    return end(s, snap, event, update, output)


def _pause(s: StepContext) -> StepResult:
    """Park the run at the pause node; its `message` (rendered against the state the node leaves)
    goes with the run and the step's record."""
    try:
        update, merged = merge(s, None, {})
        template = s.node.message
        message = render_text(template.render(s.context(merged))) if template is not None else None
    except ExpressionError as exc:
        error = NodeError(f"node '{s.node.name}': message: {exc}")
        return fail(s.snap, s.plan, at(error, s, s.snap.state), 1)
    except RunError as exc:
        return fail(s.snap, s.plan, at(exc, s, s.snap.state), 1)
    snap = s.snap.model_copy(
        update={
            "state": merged,
            "step": s.plan.step,
            "path": (*s.snap.path, s.node.name),
            "status": RunStatus.PAUSED,
            "pause_message": message,
        }
    )
    event = StepEvent(
        step=s.plan.step,
        node=s.node.name,
        status="paused",
        changed_keys=changed(s.snap.state, merged, update),
        message=message,
    )
    return StepResult(snap, event, update)
