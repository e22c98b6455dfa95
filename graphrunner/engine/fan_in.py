"""A step whose node ran items or graphs: foreach items, a child run, parallel branches.

What the node makes of its items' or children's outcomes: results collected in item order
(tolerated failures noted), a child's state projected back (OpenArmature's rules), branches
merged in declaration order; a failure past what the node tolerates fails it as any action's.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from graphrunner.engine.failures import RunFailure, ToleratedError
from graphrunner.engine.outcomes import (
    ActionFailure,
    ActionOutcome,
    ChildOutcome,
    ForeachOutcome,
    ParallelOutcome,
)
from graphrunner.engine.snapshot import PausedAt, RunStatus, StepEvent
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
    paused = next((i.paused for i in outcome.items if i.paused is not None), None)
    if paused is not None:  # in-process only: the cluster parks the parent instead
        return _paused_on_child(s, paused)
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
        if spec.graph is not None:  # a failed child run: the item names itself (node_exception, as OA's)
            failure = replace(failure, index=first.index)
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


def _of_branch(failure: ActionFailure, branch: str) -> ActionFailure:
    """A failed branch's failure as its node's: `branch_failed`, naming the branch (a limit or a
    denied permission keeps its own category; OpenArmature's `parallel_branches_branch_failed`)."""
    kind = "branch_failed" if failure.classification == "permanent" else failure.classification
    return replace(failure, classification=kind, branch=branch)


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
    if outcome.paused_at is not None:  # in-process only: the cluster parks the parent instead
        return _paused_on_child(s, outcome.paused_at)
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
    paused = [b.child.paused_at for b in outcome.branches if b.child.paused_at is not None]
    if paused:  # in-process only
        return _paused_on_child(s, paused[0])
    failed = [b for b in outcome.branches if not b.child.ok]
    if failed and spec.error_policy == "fail_fast":
        first = next((b for b in failed if b.name == outcome.failed_first), failed[0])
        graph = spec.branches[first.name].graph
        failure = _of_branch(first.child.failure(f"branch '{first.name}' (graph '{graph}')"), first.name)
        return on_failure(s, failure, 1, outcome.control)
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


def _paused_on_child(s: StepContext, where: PausedAt) -> StepResult:
    """A child run paused (or a run below it): the parent ends paused at the node that ran it,
    nothing assigned, with the pause's message and `where` it paused."""
    message = where.message
    snap = s.snap.model_copy(
        update={
            "step": s.plan.step,
            "path": (*s.snap.path, s.node.name),
            "status": RunStatus.PAUSED,
            "pause_message": message,
            "paused_at": where,
        }
    )
    event = StepEvent(step=s.plan.step, node=s.node.name, status="paused", message=message)
    return StepResult(snap, event, {})
