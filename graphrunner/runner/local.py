"""The in-process runner: a whole run in one process, driving the pure engine.

This is how users unit-test graphs, and the reference the distributed runtime agrees with.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from graphrunner import engine
from graphrunner.engine import (
    ActionFailure,
    ActionOutcome,
    ChildOutcome,
    ForeachOutcome,
    ItemOutcome,
    NoOutcome,
    Outcome,
    RunSnapshot,
    RunStatus,
    StepPlan,
    StepResult,
)
from graphrunner.engine.step import foreach_fails
from graphrunner.errors import GraphrunnerError, RunError
from graphrunner.model import ForeachNode
from graphrunner.results import RunResult
from graphrunner.runner.dispatch import dispatch
from graphrunner.tools import ToolContext, ToolRegistry, default_registry

if TYPE_CHECKING:
    from graphrunner.graph import Graph

log = logging.getLogger("graphrunner.runner")
StepObserver = Callable[[RunSnapshot, dict[str, Any]], None]
MAX_HOOK_RETRIES = 3


def utcnow() -> datetime:
    """The current instant, UTC."""
    return datetime.now(UTC)


class LocalRunner:
    """Runs graphs to the end in this process, with the built-in and registered tools."""

    def __init__(self, registry: ToolRegistry | None = None, on_step: StepObserver | None = None) -> None:
        self.registry = registry or default_registry()
        self.on_step = on_step

    async def invoke(
        self,
        graph: Graph,
        inputs: Mapping[str, Any] | None = None,
        *,
        state: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        capabilities: Sequence[str] = ("*",),
        depth: int = 0,
    ) -> RunResult:
        """Start a run and drive it until it finishes or pauses."""
        snap = engine.begin(
            graph,
            inputs,
            run_id=run_id or uuid.uuid4().hex,
            state=state,
            capabilities=capabilities,
            depth=depth,
        )
        preflight = self.preflight(graph, snap)
        if preflight is not None:
            return RunResult.from_snapshot(preflight)
        await self.started(graph, snap)
        return await self.drive(graph, snap)

    def preflight(self, graph: Graph, snap: RunSnapshot) -> RunSnapshot | None:
        """The run failed with `env_missing` when an `env_requires` variable is not set, else None."""
        missing = engine.missing_env(graph)
        if not missing:
            return None
        message = f"missing environment variables: {', '.join(missing)}"
        error = {"type": "env_missing", "message": message, "node": None, "step": 0}
        return snap.model_copy(update={"status": RunStatus.FAILED, "error": error})

    async def started(self, graph: Graph, snap: RunSnapshot) -> None:
        """Fire the `graph_started` hooks of a fresh run."""
        await self._hooks(graph, "graph_started", snap, graph_id=graph.id)

    async def drive(self, graph: Graph, snap: RunSnapshot) -> RunResult:
        """Take steps from `snap` until the run is no longer running."""
        steps: list[dict[str, Any]] = []
        exception: RunError | None = None
        while snap.status is RunStatus.RUNNING:
            plan, result, record = await self.advance(graph, snap)
            steps.append(record)
            snap, exception = result.snapshot, result.exception
            if self.on_step:
                self.on_step(snap, record)
            await self.after(graph, plan, result)
        return RunResult.from_snapshot(snap, steps, exception)

    async def advance(
        self, graph: Graph, snap: RunSnapshot, worker: str = "local"
    ) -> tuple[StepPlan, StepResult, dict[str, Any]]:
        """Take one step from `snap`: plan, do its I/O, complete it; with its transcript record."""
        started_at, started = utcnow().isoformat(), time.perf_counter()
        plan = engine.prepare(graph, snap, utcnow())
        result = await self._step(graph, snap, plan)
        record = {
            **result.event.model_dump(),
            "started_at": started_at,
            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
            "worker": worker,
        }
        return plan, result, record

    async def after(self, graph: Graph, plan: StepPlan, result: StepResult) -> None:
        """Fire the hooks that follow a committed step, and `graph_completed` at the end."""
        await self._after(graph, plan, result)
        await self.completed(graph, result.snapshot)

    async def completed(self, graph: Graph, snap: RunSnapshot) -> None:
        """Fire the `graph_completed` hooks when `snap` has finished."""
        if snap.status.finished:
            await self._hooks(
                graph,
                "graph_completed",
                snap,
                graph_id=graph.id,
                steps=snap.step,
                status=snap.status.value,
                error=snap.error,
            )

    async def _after(self, graph: Graph, plan: StepPlan, result: StepResult) -> None:
        snap = result.snapshot
        if plan.kind == "limit":
            await self._hooks(
                graph,
                "limit",
                snap,
                limit_code="max_steps",
                current_value=snap.step,
                current_max=graph.spec.config.max_steps,
            )
        elif result.event.status != "error" or snap.status is RunStatus.RUNNING:
            await self._hooks(
                graph, "after_step", snap, node=plan.node, next_node=snap.node, step_count=snap.step
            )

    async def _step(self, graph: Graph, snap: RunSnapshot, plan: StepPlan) -> StepResult:
        """Do the step's I/O, complete it, and let error hooks answer (retry/continue/fail)."""
        for hook_round in range(MAX_HOOK_RETRIES + 1):
            outcome = await self._execute(graph, snap, plan)
            result = engine.complete(graph, snap, plan, outcome, utcnow())
            if result.event.status != "error" or plan.kind == "limit" or result.event.error is None:
                return result
            error = result.event.error
            answer = engine.first_answer(
                await self._hooks(
                    graph,
                    "error",
                    snap,
                    node=plan.node,
                    error=error,
                    classification=error.get("type"),
                    step_count=snap.step,
                )
            )
            if answer == "retry" and hook_round < MAX_HOOK_RETRIES:
                continue
            if answer in ("continue", "fail"):
                return engine.complete(graph, snap, plan, _with_control(outcome, answer), utcnow())
            return result
        return result

    async def _execute(self, graph: Graph, snap: RunSnapshot, plan: StepPlan) -> Outcome:
        if plan.failure is not None or plan.kind in ("gate", "pause", "return", "limit"):
            return NoOutcome()
        if plan.kind == "action":
            assert plan.call is not None
            return await dispatch(self.registry, plan.call, self._context(snap, plan))
        if plan.kind == "foreach":
            return await self._foreach(graph, snap, plan)
        return await self._child(graph, snap, plan)

    def _context(self, snap: RunSnapshot, plan: StepPlan, index: int | None = None) -> ToolContext:
        return ToolContext(
            run_id=snap.run_id,
            graph_id=snap.graph_id,
            node=plan.node,
            step=plan.step,
            item_index=index,
        )

    async def _item(
        self, graph: Graph, snap: RunSnapshot, plan: StepPlan, index: int, item: Any
    ) -> ItemOutcome:
        call = engine.item_call(graph.nodes[plan.node], snap, index, item, utcnow())
        if isinstance(call, ActionFailure):
            return ItemOutcome(index, item, ActionOutcome(failure=call))
        return ItemOutcome(index, item, await dispatch(self.registry, call, self._context(snap, plan, index)))

    async def _foreach(self, graph: Graph, snap: RunSnapshot, plan: StepPlan) -> ForeachOutcome:
        spec = graph.nodes[plan.node].spec
        assert isinstance(spec, ForeachNode) and plan.items is not None
        items = list(enumerate(plan.items))
        if spec.parallel:
            gate = asyncio.Semaphore(spec.max_concurrency or len(items) or 1)

            async def bounded(index: int, item: Any) -> ItemOutcome:
                async with gate:
                    return await self._item(graph, snap, plan, index, item)

            return ForeachOutcome(tuple(await asyncio.gather(*(bounded(i, x) for i, x in items))))
        done: list[ItemOutcome] = []
        failed = 0
        for index, item in items:
            done.append(await self._item(graph, snap, plan, index, item))
            failed += not done[-1].outcome.ok
            if foreach_fails(graph, spec, failed, len(items)):
                break  # the node has failed: the remaining items cannot change that
        return ForeachOutcome(tuple(done))

    async def _child(self, graph: Graph, snap: RunSnapshot, plan: StepPlan) -> ChildOutcome:
        assert plan.child_graph is not None
        limit = graph.spec.config.max_depth
        if snap.depth + 1 > limit:
            return ChildOutcome(
                "failed",
                error={
                    "type": "limit_exceeded",
                    "message": f"subgraph nesting deeper than max_depth {limit}",
                },
            )
        try:
            child = graph.subgraph(plan.child_graph)
            inputs, state = child.split_child_values(plan.child_values or {})
            result = await self.invoke(
                child,
                inputs,
                state=state,
                run_id=f"{snap.run_id}.{plan.step}",
                capabilities=snap.capabilities,
                depth=snap.depth + 1,
            )
        except GraphrunnerError as exc:
            return ChildOutcome("failed", error={"type": "node_exception", "message": str(exc)})
        return ChildOutcome(result.status, result.state, result.output, result.error)

    async def _hooks(self, graph: Graph, event: str, snap: RunSnapshot, **data: Any) -> list[Any]:
        """Dispatch the graph's hooks for `event`; a failing hook is logged and ignored."""
        answers = []
        for call in engine.hook_calls(graph, event, snap, utcnow(), **data):
            outcome = await dispatch(
                self.registry, call, ToolContext(snap.run_id, snap.graph_id, call.node, snap.step)
            )
            if outcome.failure is not None:
                log.warning("hook %s of graph %s failed: %s", call.node, graph.id, outcome.failure.message)
                continue
            answers.append(outcome.result)
        return answers


def _with_control(outcome: Outcome, answer: Any) -> Outcome:
    """The outcome with a hook's control answer attached."""
    return replace(outcome, control=answer)
