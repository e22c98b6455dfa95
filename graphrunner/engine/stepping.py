"""How a step moves its run, shared by every kind of node: its context, the update merged
through the reducers, routing on, ending the run, and the error handling of DESIGN §2.5 (hook
answer, `_last_error`, `on_error`, `error_mode`). Pure: no I/O; `now` is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from graphrunner import namespaces as ns
from graphrunner.compiled import CompiledGraph, CompiledNode
from graphrunner.engine.failures import RunFailure, ToleratedError
from graphrunner.engine.outcomes import (
    ActionFailure,
    Control,
)
from graphrunner.engine.plan import StepPlan
from graphrunner.engine.routing import route
from graphrunner.engine.snapshot import RunSnapshot, RunStatus, StepEvent
from graphrunner.engine.state import check_state
from graphrunner.errors import BranchFailed, ExpressionError, NodeError, ReducerError, RunError
from graphrunner.model import ForeachNode

CATEGORY_OF = {
    "timeout": "timeout",
    "permission_denied": "permission_denied",
    "limit_exceeded": "limit_exceeded",
    "non_finite_number": "non_finite_number",
    "branch_failed": "branch_failed",
}


@dataclass(frozen=True)
class StepResult:
    """The new snapshot, the transcript event, the update applied, and the failing error if any."""

    snapshot: RunSnapshot
    event: StepEvent
    update: dict[str, Any]
    exception: RunError | None = None
    result: Any = None  # the node's `result` namespace, for the after_step hooks
    # the JSON size of each changed value, as the state check measured it (None: not measured):
    # the step's record leaves out the large ones without walking them again
    sizes: dict[str, int] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class StepContext:
    """What every helper of one `complete` call needs."""

    graph: CompiledGraph
    snap: RunSnapshot
    plan: StepPlan
    node: CompiledNode
    now: datetime

    def context(self, state: dict[str, Any], **extra: Any) -> dict[str, Any]:
        """The expression context of this step, over `state`."""
        return ns.context(
            state=state, inputs=self.snap.inputs, run=self.snap.run_namespace(), now=self.now, **extra
        )


def error_mode(graph: CompiledGraph, spec: Any) -> str:
    """The node's `error_mode`, else the graph's."""
    mode: str = getattr(spec, "error_mode", None) or graph.spec.config.error_mode
    return mode


def foreach_fails(graph: CompiledGraph, spec: ForeachNode, failed: int, total: int) -> bool:
    """True when `failed` of `total` items fail the foreach node (error mode fail, over tolerance)."""
    return failed > 0 and error_mode(graph, spec) == "fail" and failed > spec.tolerated(total)


def namespace(result: Any, rye: bool = False) -> dict[str, Any]:
    """A mapping result is the `result` namespace; anything else is `{"value": result}`
    (`{"result": result}` in a Rye graph, as the walker wraps it)."""
    return dict(result) if isinstance(result, dict) else {("result" if rye else "value"): result}


def _assign(s: StepContext, result_ns: Any, extra: dict[str, Any]) -> dict[str, Any]:
    ctx = s.context(s.snap.state, result=result_ns)
    update = {}
    for key, template in s.node.assign.items():
        try:
            update[key] = template.render(ctx)
        except ExpressionError as exc:
            raise NodeError(f"node '{s.node.name}': assign.{key}: {exc}", node=s.node.name) from exc
    return {**extra, **update}


def merge(
    s: StepContext, result_ns: Any, extra: dict[str, Any], contributions: tuple[dict[str, Any], ...] = ()
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The node's update and the merged state: `contributions` (parallel branches) are merged
    first, one after another in order, then the node's own update (`assign` and `extra`)."""
    update = _assign(s, result_ns, extra)
    state = s.snap.state
    for contribution in contributions:
        state = s.graph.reducers.merge(state, contribution, s.node.name)
    combined = {k: v for c in contributions for k, v in c.items()} | update
    return combined, s.graph.reducers.merge(state, update, s.node.name)


def succeed(
    s: StepContext,
    result_ns: Any,
    extra: dict[str, Any],
    attempts: int,
    cache_hit: bool,
    suppressed: tuple[ToleratedError, ...] = (),
    contributions: tuple[dict[str, Any], ...] = (),
) -> StepResult:
    """The node succeeded: merge its update (and `contributions`, in order), route on, advance."""
    try:
        update, merged = merge(s, result_ns, extra, contributions)
    except RunError as exc:
        return fail(s.snap, s.plan, at(exc, s, s.snap.state), attempts)
    try:
        target = route(s.node.next, s.context(merged, result=result_ns), s.graph.nodes, s.node.name)
    except RunError as exc:
        return fail(s.snap, s.plan, at(exc, s, merged), attempts, merged)
    advanced = advance(
        s,
        merged,
        update,
        target,
        "ok",
        attempts=attempts,
        cache_hit=cache_hit,
        suppressed=suppressed,
    )
    return replace(advanced, result=result_ns)


def at(exc: RunError, s: StepContext, state: dict[str, Any]) -> RunError:
    """`exc`, placed at the step's node and step, with `state` unless it carries its own."""
    exc.node, exc.step = s.node.name, s.plan.step
    if exc.state is None:
        exc.state = state
    return exc


def advance(
    s: StepContext,
    state: dict[str, Any],
    update: dict[str, Any],
    target: str | None,
    status: str,
    *,
    attempts: int = 1,
    cache_hit: bool = False,
    error: RunFailure | None = None,
    suppressed: tuple[ToleratedError, ...] = (),
) -> StepResult:
    """The run after the step: its new state, the next node (`target`; None ends the run), the event."""
    snap = s.snap.model_copy(
        update={
            "state": state,
            "node": target,
            "step": s.plan.step,
            "path": (*s.snap.path, s.node.name),
            "errors": (*s.snap.errors, *suppressed),
        }
    )
    event = StepEvent(
        step=s.plan.step,
        node=s.node.name,
        status=status,
        next_node=target,
        changed_keys=changed(s.snap.state, state, update),
        error=error,
        cache_hit=cache_hit,
        attempts=attempts,
    )
    if target is None:
        return end(s, snap, event, update, output=state)
    return StepResult(snap, event, update)


def changed(before: dict[str, Any], after: dict[str, Any], update: dict[str, Any]) -> tuple[str, ...]:
    """The keys of `update` whose values the step changed (or added)."""
    return tuple(k for k in update if before.get(k) != after.get(k) or k not in before)


def end(
    s: StepContext, snap: RunSnapshot, event: StepEvent, update: dict[str, Any], output: Any
) -> StepResult:
    """The run ends after the step: `completed` (with errors, when it tolerated some), or `failed`
    when its final state does not check out."""
    try:
        check_state(s.graph.spec, snap.state, "the end of the run")
    except RunError as exc:
        return fail(s.snap, s.plan, at(exc, s, snap.state), event.attempts, snap.state)
    status = RunStatus.COMPLETED_WITH_ERRORS if snap.errors else RunStatus.COMPLETED
    final = snap.model_copy(update={"status": status, "node": None, "output": output})
    return StepResult(
        final, event.model_copy(update={"status": event.status if event.error is not None else "end"}), update
    )


def on_failure(s: StepContext, failure: ActionFailure, attempts: int, control: Control | None) -> StepResult:
    """DESIGN §2.5 after retries and hooks: `_last_error`, then on_error, then error_mode."""
    spec = s.node.spec
    last_error = {
        "node": s.node.name,
        "step": s.plan.step,
        "type": failure.classification,
        "error_type": failure.error_type,
        "message": failure.message,
        "attempts": attempts,
    }
    if s.graph.spec.rye:  # the walker's `_last_error` is `{node, error}`
        last_error["error"] = failure.message
    state = {**s.snap.state, "_last_error": last_error}
    error = failure.to_run_failure(s.node.name, s.plan.step)
    on_error = getattr(spec, "on_error", None)
    mode = error_mode(s.graph, spec)
    if control != "fail" and (control == "continue" or (on_error is None and mode == "continue")):
        # the run's `errors` hold no traceback (the transcript record does)
        tolerated = failure.to_run_failure(traceback=False)
        suppressed = (ToleratedError(step=s.plan.step, node=s.node.name, error=tolerated),)
        try:
            target = route(s.node.next, s.context(state), s.graph.nodes, s.node.name)
        except RunError as exc:
            return fail(s.snap, s.plan, at(exc, s, state), attempts, state)
        return advance(
            s,
            state,
            {"_last_error": last_error},
            target,
            "error",
            attempts=attempts,
            error=error,
            suppressed=suppressed,
        )
    if control != "fail" and on_error is not None:
        return advance(
            s, state, {"_last_error": last_error}, on_error, "error", attempts=attempts, error=error
        )
    category = CATEGORY_OF.get(failure.classification, "node_exception")
    err = (
        BranchFailed(
            failure.message,
            node=s.node.name,
            step=s.plan.step,
            state=state,
            branch=failure.branch,
            index=failure.index,
        )
        if category == "branch_failed"
        else NodeError(failure.message, node=s.node.name, step=s.plan.step, state=state, category=category)
    )
    trace, branch, index = failure.traceback, failure.branch, failure.index  # a failed branch or item
    return fail(s.snap, s.plan, err, attempts, state, traceback=trace, branch=branch, index=index)


def fail(
    snap: RunSnapshot,
    plan: StepPlan,
    exc: RunError,
    attempts: int,
    state: dict[str, Any] | None = None,
    *,
    traceback: str | None = None,
    branch: str | None = None,
    index: int | None = None,
) -> StepResult:
    """End the run `failed` at `plan.node` with `exc` (and the `traceback` of the exception
    behind it, if any; the `branch` or item `index` of a failed child run); the node stays
    current for a resume."""
    error = RunFailure(
        type=exc.category,
        message=str(exc),
        node=plan.node,
        step=plan.step,
        field=exc.field if isinstance(exc, ReducerError) else None,
        reducer=exc.reducer if isinstance(exc, ReducerError) else None,
        branch=branch,
        index=index,
        traceback=traceback or None,
    )
    ran = plan.kind != "limit"
    final = snap.model_copy(
        update={
            "state": state if state is not None else snap.state,
            "status": RunStatus.FAILED,
            "error": error,
            "step": plan.step if ran else snap.step,
            "path": (*snap.path, plan.node) if ran else snap.path,
        }
    )
    keys = changed(snap.state, final.state, final.state)  # e.g. `_last_error`, a merged update
    event = StepEvent(
        step=plan.step, node=plan.node, status="error", error=error, attempts=attempts, changed_keys=keys
    )
    if exc.state is None:
        exc.state = final.state
    return StepResult(final, event, {}, exc)
