"""The pure second half of a step: given what the action did, the update, state and next node.

`complete` merges the node's update through the reducers, routes against the post-update
state, and applies the error handling of DESIGN §2.5 (hook answer, `_last_error`,
`on_error`, `error_mode`). It does no I/O; `now` is passed in.
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
    ActionOutcome,
    ChildOutcome,
    Control,
    ForeachOutcome,
    Outcome,
    ParallelOutcome,
)
from graphrunner.engine.plan import StepPlan
from graphrunner.engine.routing import route
from graphrunner.engine.snapshot import RunSnapshot, RunStatus, StepEvent
from graphrunner.engine.state import check_state
from graphrunner.errors import ExpressionError, LimitExceeded, NodeError, ReducerError, RunError
from graphrunner.expressions.rendering import render_text
from graphrunner.limits import check_step_state
from graphrunner.model import FIELD_NAME, ForeachNode, ParallelNode, PauseNode, ReturnNode, SubgraphNode

CATEGORY_OF = {
    "timeout": "timeout",
    "permission_denied": "permission_denied",
    "limit_exceeded": "limit_exceeded",
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
class _Step:
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
    if check.problem is None:
        return replace(result, sizes=check.sizes)
    err = LimitExceeded(
        f"node '{plan.node}' {check.problem}; the state is kept as it was before the node",
        node=plan.node,
        step=plan.step,
        state=snap.state,
    )
    return _fail(snap, plan, err, result.event.attempts)


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
        return _fail(snap, plan, err, attempts=0)
    s = _Step(graph, snap, plan, graph.nodes[plan.node], now)
    control = getattr(outcome, "control", None)
    if plan.failure is not None:
        return _on_failure(s, plan.failure, 1, control)
    if isinstance(outcome, ActionOutcome):
        if outcome.failure is not None:
            return _on_failure(s, outcome.failure, outcome.attempts, control)
        return _after_action(s, outcome)
    if isinstance(outcome, ForeachOutcome):
        return _after_foreach(s, outcome)
    if isinstance(outcome, ChildOutcome):
        return _after_child(s, outcome)
    if isinstance(outcome, ParallelOutcome):
        return _after_parallel(s, outcome)
    return _after_plain(s)


def _after_action(s: _Step, outcome: ActionOutcome) -> StepResult:
    result = outcome.result
    key: str | None = getattr(s.node.spec, "result_key", None)
    extra = {key: result} if key else {}
    if getattr(s.node.spec, "assign_result", False):
        try:
            extra = {**_result_update(s, result, extra), **extra}
        except RunError as exc:
            return _fail(s.snap, s.plan, _at(exc, s, s.snap.state), outcome.attempts)
    return _succeed(s, _namespace(result), extra, outcome.attempts, outcome.cache_hit)


def _result_update(s: _Step, result: Any, extra: dict[str, Any]) -> dict[str, Any]:
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


def _namespace(result: Any, rye: bool = False) -> dict[str, Any]:
    """A mapping result is the `result` namespace; anything else is `{"value": result}`
    (`{"result": result}` in a Rye graph, as the walker wraps it)."""
    return dict(result) if isinstance(result, dict) else {("result" if rye else "value"): result}


def _after_plain(s: _Step) -> StepResult:
    spec = s.node.spec
    if isinstance(spec, ReturnNode):
        return _return(s)
    if isinstance(spec, PauseNode):
        return _pause(s)
    return _succeed(s, None, {}, 1, False)


def _assign(s: _Step, result_ns: Any, extra: dict[str, Any]) -> dict[str, Any]:
    ctx = s.context(s.snap.state, result=result_ns)
    update = {}
    for key, template in s.node.assign.items():
        try:
            update[key] = template.render(ctx)
        except ExpressionError as exc:
            raise NodeError(f"node '{s.node.name}': assign.{key}: {exc}", node=s.node.name) from exc
    return {**extra, **update}


def _merge(
    s: _Step, result_ns: Any, extra: dict[str, Any], contributions: tuple[dict[str, Any], ...] = ()
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The node's update and the merged state: `contributions` (parallel branches) are merged
    first, one after another in order, then the node's own update (`assign` and `extra`)."""
    update = _assign(s, result_ns, extra)
    state = s.snap.state
    for contribution in contributions:
        state = s.graph.reducers.merge(state, contribution, s.node.name)
    combined = {k: v for c in contributions for k, v in c.items()} | update
    return combined, s.graph.reducers.merge(state, update, s.node.name)


def _succeed(
    s: _Step,
    result_ns: Any,
    extra: dict[str, Any],
    attempts: int,
    cache_hit: bool,
    suppressed: tuple[ToleratedError, ...] = (),
    contributions: tuple[dict[str, Any], ...] = (),
) -> StepResult:
    try:
        update, merged = _merge(s, result_ns, extra, contributions)
    except RunError as exc:
        return _fail(s.snap, s.plan, _at(exc, s, s.snap.state), attempts)
    try:
        target = route(s.node.next, s.context(merged, result=result_ns), s.graph.nodes, s.node.name)
    except RunError as exc:
        return _fail(s.snap, s.plan, _at(exc, s, merged), attempts, merged)
    advanced = _advance(
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


def _at(exc: RunError, s: _Step, state: dict[str, Any]) -> RunError:
    exc.node, exc.step = s.node.name, s.plan.step
    if exc.state is None:
        exc.state = state
    return exc


def _advance(
    s: _Step,
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
        changed_keys=_changed(s.snap.state, state, update),
        error=error,
        cache_hit=cache_hit,
        attempts=attempts,
    )
    if target is None:
        return _end(s, snap, event, update, output=state)
    return StepResult(snap, event, update)


def _changed(before: dict[str, Any], after: dict[str, Any], update: dict[str, Any]) -> tuple[str, ...]:
    return tuple(k for k in update if before.get(k) != after.get(k) or k not in before)


def _end(s: _Step, snap: RunSnapshot, event: StepEvent, update: dict[str, Any], output: Any) -> StepResult:
    try:
        check_state(s.graph.spec, snap.state, "the end of the run")
    except RunError as exc:
        return _fail(s.snap, s.plan, _at(exc, s, snap.state), event.attempts, snap.state)
    status = RunStatus.COMPLETED_WITH_ERRORS if snap.errors else RunStatus.COMPLETED
    final = snap.model_copy(update={"status": status, "node": None, "output": output})
    return StepResult(
        final, event.model_copy(update={"status": event.status if event.error is not None else "end"}), update
    )


def _return(s: _Step) -> StepResult:
    try:
        update, merged = _merge(s, None, {})
        node = s.node
        output = node.output.render(s.context(merged)) if node.output is not None else merged
    except ExpressionError as exc:
        return _fail(
            s.snap,
            s.plan,
            _at(NodeError(f"node '{s.node.name}': output: {exc}"), s, s.snap.state),
            1,
        )
    except RunError as exc:
        return _fail(s.snap, s.plan, _at(exc, s, s.snap.state), 1)
    snap = s.snap.model_copy(
        update={"state": merged, "step": s.plan.step, "path": (*s.snap.path, s.node.name)}
    )
    event = StepEvent(
        step=s.plan.step,
        node=s.node.name,
        status="end",
        changed_keys=_changed(s.snap.state, merged, update),
    )
    return _end(s, snap, event, update, output)


def _pause(s: _Step) -> StepResult:
    """Park the run at the pause node; its `message` (rendered against the state the node leaves)
    goes with the run and the step's record."""
    try:
        update, merged = _merge(s, None, {})
        template = s.node.message
        message = render_text(template.render(s.context(merged))) if template is not None else None
    except ExpressionError as exc:
        error = NodeError(f"node '{s.node.name}': message: {exc}")
        return _fail(s.snap, s.plan, _at(error, s, s.snap.state), 1)
    except RunError as exc:
        return _fail(s.snap, s.plan, _at(exc, s, s.snap.state), 1)
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
        changed_keys=_changed(s.snap.state, merged, update),
        message=message,
    )
    return StepResult(snap, event, update)


def _after_foreach(s: _Step, outcome: ForeachOutcome) -> StepResult:
    spec = s.node.spec
    assert isinstance(spec, ForeachNode)
    failed = [i for i in outcome.items if not i.outcome.ok]
    # a sequential foreach stops at its failure: counts and tolerance are of the whole list
    total = len(s.plan.items) if s.plan.items is not None else len(outcome.items)
    mode = error_mode(s.graph, spec)
    if foreach_fails(s.graph, spec, len(failed), total):
        first = failed[0]
        assert first.outcome.failure is not None
        failure = ActionFailure(
            first.outcome.failure.classification,
            f"{len(failed)} of {total} items failed (tolerated {spec.tolerated(total)}); "
            f"first, item {first.index}: {first.outcome.failure.message}",
            first.outcome.failure.error_type,
            first.outcome.failure.traceback,
        )
        return _on_failure(s, failure, max(i.outcome.attempts for i in failed), outcome.control)
    results = [i.outcome.result for i in outcome.items if i.outcome.ok]
    failures = [{"index": i.index, "item": i.item, "error": _failure_dict(i.outcome)} for i in failed]
    suppressed = (
        tuple(
            ToleratedError(step=s.plan.step, node=s.node.name, error=_item_error(i.index, i.outcome))
            for i in failed
        )
        if mode == "continue"
        else ()
    )
    result_ns = {"results": results, "failed": failures, "count": total}
    extra: dict[str, Any] = {spec.collect: results} if spec.collect else {}
    if spec.result_key:
        extra[spec.result_key] = result_ns
    attempts = max((i.outcome.attempts for i in outcome.items), default=1)
    return _succeed(s, result_ns, extra, attempts, False, suppressed)


def _failure_dict(outcome: ActionOutcome) -> dict[str, Any]:
    """An item's error as the foreach's `failed` list (in state) holds it: no traceback."""
    return outcome.failure.to_dict(traceback=False) if outcome.failure else {}


def _item_error(index: int, outcome: ActionOutcome) -> RunFailure:
    """A failed item's error as the run's tolerated `errors` hold it: its index, no traceback."""
    assert outcome.failure is not None
    return outcome.failure.to_run_failure(traceback=False).model_copy(update={"index": index})


def _after_child(s: _Step, outcome: ChildOutcome) -> StepResult:
    spec = s.node.spec
    assert isinstance(spec, SubgraphNode)
    if outcome.status == RunStatus.PAUSED:  # in-process only: the cluster parks the parent instead
        return _paused_on_child(s, outcome.message)
    if not outcome.ok:
        return _on_failure(s, outcome.failure(f"subgraph '{spec.graph}'"), 1, outcome.control)
    projected = _projected(s, spec.outputs, outcome)
    if spec.result_key:
        projected[spec.result_key] = outcome.output
    result_ns = _namespace(outcome.output, s.graph.spec.rye)
    return _succeed(s, result_ns, projected, 1, False)


def _projected(s: _Step, outputs: dict[str, str] | None, outcome: ChildOutcome) -> dict[str, Any]:
    """What a finished child contributes: `outputs` (parent field: child field), else the child
    fields named like the parent's declared fields."""
    if outputs is not None:
        return {parent: outcome.state.get(child) for parent, child in outputs.items()}
    return {k: v for k, v in outcome.state.items() if k in s.graph.spec.state}


def _after_parallel(s: _Step, outcome: ParallelOutcome) -> StepResult:
    """Merge the branches' contributions in declaration order (fail_fast: the first failure fails
    the node; collect: the failures go to `errors_field`)."""
    spec = s.node.spec
    assert isinstance(spec, ParallelNode)
    paused = [b.child for b in outcome.branches if b.child.status == RunStatus.PAUSED]
    if paused:  # in-process only
        return _paused_on_child(s, paused[0].message)
    failed = [b for b in outcome.branches if not b.child.ok]
    if failed and spec.error_policy == "fail_fast":
        first = next((b for b in failed if b.name == outcome.failed_first), failed[0])
        graph = spec.branches[first.name].graph
        return _on_failure(
            s, first.child.failure(f"branch '{first.name}' (graph '{graph}')"), 1, outcome.control
        )
    done = [b for b in outcome.branches if b.child.ok]
    contributions = tuple(_projected(s, spec.branches[b.name].outputs, b.child) for b in done)
    errors = [{"branch": b.name, **_branch_error(b.child)} for b in failed]
    result_ns = {"branches": {b.name: b.child.output for b in done}, "errors": errors}
    extra: dict[str, Any] = {spec.errors_field: errors} if spec.errors_field else {}
    if spec.result_key:
        extra[spec.result_key] = result_ns
    return _succeed(s, result_ns, extra, 1, False, contributions=contributions)


def _branch_error(child: ChildOutcome) -> dict[str, Any]:
    """A failed branch's `{type, message}` as the parallel node's `errors` (JSON data in state)."""
    if child.error is None:
        return {"type": child.status, "message": f"ended {child.status}"}
    return {"type": child.error.type, "message": child.error.message}


def _paused_on_child(s: _Step, message: str | None) -> StepResult:
    """The child run paused: the parent ends paused at the subgraph node, nothing assigned, with
    the child's pause `message`."""
    snap = s.snap.model_copy(
        update={
            "step": s.plan.step,
            "path": (*s.snap.path, s.node.name),
            "status": RunStatus.PAUSED,
            "pause_message": message,
        }
    )
    event = StepEvent(step=s.plan.step, node=s.node.name, status="paused", message=message)
    return StepResult(snap, event, {})


def _on_failure(s: _Step, failure: ActionFailure, attempts: int, control: Control | None) -> StepResult:
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
            return _fail(s.snap, s.plan, _at(exc, s, state), attempts, state)
        return _advance(
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
        return _advance(
            s, state, {"_last_error": last_error}, on_error, "error", attempts=attempts, error=error
        )
    category = CATEGORY_OF.get(failure.classification, "node_exception")
    err = NodeError(failure.message, node=s.node.name, step=s.plan.step, state=state, category=category)
    return _fail(s.snap, s.plan, err, attempts, state, traceback=failure.traceback)


def _fail(
    snap: RunSnapshot,
    plan: StepPlan,
    exc: RunError,
    attempts: int,
    state: dict[str, Any] | None = None,
    *,
    traceback: str | None = None,
) -> StepResult:
    """End the run `failed` at `plan.node` with `exc` (and the `traceback` of the exception
    behind it, if any); the node stays current for a resume."""
    error = RunFailure(
        type=exc.category,
        message=str(exc),
        node=plan.node,
        step=plan.step,
        field=exc.field if isinstance(exc, ReducerError) else None,
        reducer=exc.reducer if isinstance(exc, ReducerError) else None,
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
    changed = _changed(snap.state, final.state, final.state)  # e.g. `_last_error`, a merged update
    event = StepEvent(
        step=plan.step, node=plan.node, status="error", error=error, attempts=attempts, changed_keys=changed
    )
    if exc.state is None:
        exc.state = final.state
    return StepResult(final, event, {}, exc)
