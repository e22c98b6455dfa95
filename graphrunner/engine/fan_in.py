"""A step whose node ran items or graphs: foreach items, a child run, parallel branches.

What the node makes of its items' or children's outcomes: results collected in item order
(tolerated failures noted), a child's state projected back (OpenArmature's rules), branches
merged in declaration order; a failure past what the node tolerates fails it as any action's.
"""

from __future__ import annotations

from typing import Any

from graphrunner.engine.failures import RunFailure, ToleratedError
from graphrunner.engine.outcomes import (
    ActionFailure,
    ActionOutcome,
    ChildOutcome,
    ForeachOutcome,
    ParallelOutcome,
)
from graphrunner.engine.snapshot import RunStatus, StepEvent
from graphrunner.engine.stepping import (
    StepContext,
    StepResult,
    error_mode,
    foreach_fails,
    namespace,
    on_failure,
    succeed,
)
from graphrunner.model import ForeachNode, ParallelNode, SubgraphNode


def after_foreach(s: StepContext, outcome: ForeachOutcome) -> StepResult:
    """Collect the items in item order; past the node's tolerance, fail it as an action's failure."""
    spec = s.node.spec
    assert isinstance(spec, ForeachNode)
    fold = outcome.fold()
    failed = fold.failed
    # a sequential foreach stops at its failure: counts and tolerance are of the whole list
    total = len(s.plan.items) if s.plan.items is not None else fold.count
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
        return on_failure(s, failure, max(i.outcome.attempts for i in failed), outcome.control)
    results = fold.results
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
    return succeed(s, result_ns, extra, fold.attempts, False, suppressed)


def _failure_dict(outcome: ActionOutcome) -> dict[str, Any]:
    """An item's error as the foreach's `failed` list (in state) holds it: no traceback."""
    return outcome.failure.to_dict(traceback=False) if outcome.failure else {}


def _item_error(index: int, outcome: ActionOutcome) -> RunFailure:
    """A failed item's error as the run's tolerated `errors` hold it: its index, no traceback."""
    assert outcome.failure is not None
    return outcome.failure.to_run_failure(traceback=False).model_copy(update={"index": index})


def after_child(s: StepContext, outcome: ChildOutcome) -> StepResult:
    """Project a finished child run back into the state (a paused child parks the parent)."""
    spec = s.node.spec
    assert isinstance(spec, SubgraphNode)
    if outcome.status == RunStatus.PAUSED:  # in-process only: the cluster parks the parent instead
        return _paused_on_child(s, outcome.message)
    if not outcome.ok:
        return on_failure(s, outcome.failure(f"subgraph '{spec.graph}'"), 1, outcome.control)
    projected = _projected(s, spec.outputs, outcome)
    if spec.result_key:
        projected[spec.result_key] = outcome.output
    result_ns = namespace(outcome.output, s.graph.spec.rye)
    return succeed(s, result_ns, projected, 1, False)


def _projected(s: StepContext, outputs: dict[str, str] | None, outcome: ChildOutcome) -> dict[str, Any]:
    """What a finished child contributes: `outputs` (parent field: child field), else the child
    fields named like the parent's declared fields."""
    if outputs is not None:
        return {parent: outcome.state.get(child) for parent, child in outputs.items()}
    return {k: v for k, v in outcome.state.items() if k in s.graph.spec.state}


def after_parallel(s: StepContext, outcome: ParallelOutcome) -> StepResult:
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
        return on_failure(
            s, first.child.failure(f"branch '{first.name}' (graph '{graph}')"), 1, outcome.control
        )
    done = [b for b in outcome.branches if b.child.ok]
    contributions = tuple(_projected(s, spec.branches[b.name].outputs, b.child) for b in done)
    errors = [{"branch": b.name, **_branch_error(b.child)} for b in failed]
    result_ns = {"branches": {b.name: b.child.output for b in done}, "errors": errors}
    extra: dict[str, Any] = {spec.errors_field: errors} if spec.errors_field else {}
    if spec.result_key:
        extra[spec.result_key] = result_ns
    return succeed(s, result_ns, extra, 1, False, contributions=contributions)


def _branch_error(child: ChildOutcome) -> dict[str, Any]:
    """A failed branch's `{type, message}` as the parallel node's `errors` (JSON data in state)."""
    if child.error is None:
        return {"type": child.status, "message": f"ended {child.status}"}
    return {"type": child.error.type, "message": child.error.message}


def _paused_on_child(s: StepContext, message: str | None) -> StepResult:
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
