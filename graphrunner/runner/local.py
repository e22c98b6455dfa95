"""The in-process runner: a whole run in one process, driving the pure engine.

This is how users unit-test graphs, and the reference the distributed runtime agrees with.
Dispatch, hooks and the cache are the `StepServices` the cluster uses too. Each run, step and
foreach item is a span through the OpenTelemetry API's global tracer (`telemetry/local_spans.py`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from graphrunner import engine
from graphrunner.compiled import CompiledGraph
from graphrunner.engine import (
    ActionFailure,
    ActionOutcome,
    BranchOutcome,
    ChildOutcome,
    ForeachOutcome,
    ItemOutcome,
    NoOutcome,
    Outcome,
    ParallelOutcome,
    Retried,
    RunFailure,
    RunSnapshot,
    RunStatus,
    StepPlan,
    StepResult,
)
from graphrunner.engine.grants import child_grants
from graphrunner.engine.snapshot import PausedAt
from graphrunner.engine.stepping import foreach_fails
from graphrunner.errors import GraphrunnerError, RunError
from graphrunner.model import ForeachNode, ParallelNode
from graphrunner.results import RunResult
from graphrunner.services import StepServices, tool_context
from graphrunner.services.records import AnyRecord, StepRecord, retry_records, utcnow
from graphrunner.services.step_services import MAX_HOOK_RETRIES
from graphrunner.settings import Settings
from graphrunner.telemetry import local_spans
from graphrunner.tools import ToolRegistry

StepObserver = Callable[[RunSnapshot, dict[str, Any]], None]


class LocalRunner:
    """Runs graphs to the end in this process, with the built-in and registered tools."""

    def __init__(self, services: StepServices | None = None, on_step: StepObserver | None = None) -> None:
        self.services = services or StepServices()
        self.on_step = on_step

    @classmethod
    def from_settings(
        cls, settings: Settings, *, registry: ToolRegistry | None = None, on_step: StepObserver | None = None
    ) -> LocalRunner:
        """A runner with the limits and default capabilities of `settings`."""
        return cls(StepServices.from_settings(settings, registry), on_step)

    async def invoke(
        self,
        graph: CompiledGraph,
        inputs: Mapping[str, Any] | None = None,
        *,
        state: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        capabilities: Sequence[str] | None = None,
        depth: int = 0,
        start: str | None = None,
        max_depth: int | None = None,
    ) -> RunResult:
        """Start a run (at node `start`, else the entry node) and drive it until it finishes or
        pauses (capabilities: the services' default; `max_depth`: how deep its children may nest)."""
        snap = engine.begin(
            graph,
            inputs,
            run_id=run_id or uuid.uuid4().hex,
            state=state,
            capabilities=self.services.default_capabilities if capabilities is None else capabilities,
            depth=depth,
            max_state_bytes=self.services.max_state_bytes,
            start=start,
        )
        if max_depth is not None:
            snap = snap.model_copy(update={"max_depth": max_depth})
        with local_spans.run(graph, snap) as traced:
            failed = self.services.env_failure(graph, snap)
            if failed is not None:
                traced.ended(failed)
                return RunResult.from_snapshot(failed)
            await self.services.started(graph, snap)
            result = await self.drive(graph, snap)
            traced.ended(result.snapshot or snap)
            return result

    async def drive(self, graph: CompiledGraph, snap: RunSnapshot) -> RunResult:
        """Take steps from `snap` until the run is no longer running."""
        steps: list[dict[str, Any]] = []
        exception: RunError | None = None
        while snap.status is RunStatus.RUNNING:
            with local_spans.step(graph, snap) as traced:
                plan, result, records = await self.advance(graph, snap)
                traced.ended(plan, result, records)
            steps += [r.to_dict() for r in records]
            snap, exception = result.snapshot, result.exception
            if self.on_step:
                self.on_step(snap, steps[-1])
            await self.services.after(graph, plan, result)
        return RunResult.from_snapshot(snap, steps, exception)

    async def advance(
        self, graph: CompiledGraph, snap: RunSnapshot, worker: str = "local"
    ) -> tuple[StepPlan, StepResult, list[AnyRecord]]:
        """Take one step from `snap`: plan, do its I/O, complete it; with its transcript records
        (one per retried attempt, then the step's own)."""
        started_at, started = utcnow().isoformat(), time.perf_counter()
        plan = engine.prepare(graph, snap, utcnow())
        result, retries = await self._step(graph, snap, plan)
        record = StepRecord.of(result, started_at, started, worker)
        return plan, result, [*retry_records(plan, retries, worker), record]

    async def _step(
        self, graph: CompiledGraph, snap: RunSnapshot, plan: StepPlan
    ) -> tuple[StepResult, tuple[Retried, ...]]:
        """Do the step's I/O and complete it; error hooks may answer retry (the step runs again)."""
        retries: tuple[Retried, ...] = ()
        for hook_round in range(MAX_HOOK_RETRIES + 1):
            outcome = await self._execute(graph, snap, plan)
            retries += getattr(outcome, "retries", ())
            result, answer = await self.services.finish(graph, snap, plan, outcome, hook_round)
            if answer != "retry":
                break
        return result, retries

    async def _execute(self, graph: CompiledGraph, snap: RunSnapshot, plan: StepPlan) -> Outcome:
        if plan.failure is not None or plan.kind in ("gate", "pause", "return", "limit"):
            return NoOutcome()
        if plan.kind == "action":
            assert plan.call is not None
            return await self.services.call(snap, plan.call, tool_context(snap, plan.node, plan.step))
        if plan.kind == "foreach":
            return await self._foreach(graph, snap, plan)
        if plan.kind == "parallel":
            return await self._parallel(graph, snap, plan)
        assert plan.child_graph is not None
        return await self._child(
            graph, snap, plan.child_graph, plan.child_values, f"{snap.run_id}.{plan.step}"
        )

    async def _item(
        self, graph: CompiledGraph, snap: RunSnapshot, plan: StepPlan, index: int, item: Any
    ) -> ItemOutcome:
        if plan.child_graph is not None:
            return await self._item_child(graph, snap, plan, index, item)
        call = engine.item_call(graph.nodes[plan.node], snap, index, item, utcnow())
        if isinstance(call, ActionFailure):
            return ItemOutcome(index, item, ActionOutcome(failure=call))
        context = tool_context(snap, plan.node, plan.step, index)
        with local_spans.item(snap, plan.node, index) as traced:
            outcome = await self.services.call(snap, call, context)
            traced.ended(outcome.failure)
        return ItemOutcome(index, item, outcome)

    async def _foreach(self, graph: CompiledGraph, snap: RunSnapshot, plan: StepPlan) -> ForeachOutcome:
        spec = graph.nodes[plan.node].spec
        assert isinstance(spec, ForeachNode) and plan.items is not None
        items = list(enumerate(plan.items))
        if spec.parallel:
            return await self._parallel_items(graph, snap, plan, spec, items)
        done: list[ItemOutcome] = []
        failed = 0
        for index, item in items:
            done.append(await self._item(graph, snap, plan, index, item))
            if done[-1].paused is not None:
                break  # the item's child run paused: so does the node (and the run)
            failed += not done[-1].outcome.ok
            if foreach_fails(graph, spec, failed, len(items)):
                break  # the node has failed: the remaining items cannot change that
        return ForeachOutcome(tuple(done))

    async def _parallel_items(
        self,
        graph: CompiledGraph,
        snap: RunSnapshot,
        plan: StepPlan,
        spec: ForeachNode,
        items: list[tuple[int, Any]],
    ) -> ForeachOutcome:
        """Items at once (at most `max_concurrency`), as on a cluster: every item of an action
        runs (a chord runs them all); for a foreach over a graph, once the node has failed past
        its tolerance the child runs still going are cancelled and left out (a cluster cancels
        its kids)."""
        gate = asyncio.Semaphore(spec.max_concurrency or len(items) or 1)

        async def bounded(index: int, item: Any) -> ItemOutcome:
            async with gate:
                return await self._item(graph, snap, plan, index, item)

        pending = {asyncio.ensure_future(bounded(i, x)) for i, x in items}
        done: list[ItemOutcome] = []
        while pending:
            finished, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            done += [task.result() for task in finished]
            failed = sum(not d.outcome.ok for d in done)
            paused = any(d.paused is not None for d in done)
            if spec.graph is not None and (paused or foreach_fails(graph, spec, failed, len(items))):
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                break
        return ForeachOutcome(tuple(sorted(done, key=lambda d: d.index)))

    async def _item_child(
        self, graph: CompiledGraph, snap: RunSnapshot, plan: StepPlan, index: int, item: Any
    ) -> ItemOutcome:
        """One item of a foreach over a graph: a child run, whose output is the item's result."""
        assert plan.child_graph is not None
        values = engine.item_child(graph.nodes[plan.node], snap, index, item, utcnow())
        if isinstance(values, ActionFailure):
            return ItemOutcome(index, item, ActionOutcome(failure=values))
        run_id = f"{snap.run_id}.{plan.step}.{index}"
        child = await self._child(graph, snap, plan.child_graph, values, run_id, index=index)
        return child.as_item(index, item, f"item {index} (graph '{plan.child_graph}')")

    async def _parallel(self, graph: CompiledGraph, snap: RunSnapshot, plan: StepPlan) -> ParallelOutcome:
        """Every branch at once; with fail_fast the first failure cancels the branches still running."""
        spec = graph.nodes[plan.node].spec
        assert isinstance(spec, ParallelNode)
        tasks = {
            asyncio.ensure_future(
                self._child(
                    graph, snap, b.graph, b.values, f"{snap.run_id}.{plan.step}.{b.name}", branch=b.name
                )
            ): b.name
            for b in plan.branches
        }
        ended: dict[str, ChildOutcome] = {}
        failed_first = None
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                ended[tasks[task]] = task.result()
                if failed_first is None and not ended[tasks[task]].ok:
                    failed_first = tasks[task]
            paused = any(e.paused_at is not None for e in ended.values())
            if failed_first is not None and (paused or spec.error_policy == "fail_fast"):
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                cancelled = ChildOutcome(
                    "cancelled", error=RunFailure(type="cancelled", message="a branch failed")
                )
                ended |= {tasks[t]: cancelled for t in pending}
                break
        order = [b.name for b in plan.branches]
        return ParallelOutcome(tuple(BranchOutcome(n, ended[n]) for n in order), failed_first)

    async def _child(
        self,
        graph: CompiledGraph,
        snap: RunSnapshot,
        graph_id: str,
        values: dict[str, Any] | None,
        run_id: str,
        *,
        branch: str | None = None,
        index: int | None = None,
    ) -> ChildOutcome:
        """Run the child graph `graph_id` to its end in this process (a subgraph, `branch` or item
        `index`), its run span under the step's."""
        grants = child_grants(graph, snap)
        if isinstance(grants, RunFailure):
            return ChildOutcome("failed", error=grants)
        try:
            child = graph.subgraph(graph_id)
            inputs, state = child.split_child_values(values or {})
            with local_spans.child(snap, branch=branch, index=index):
                result = await self.invoke(
                    child,
                    inputs,
                    state=state,
                    run_id=run_id,
                    capabilities=grants.capabilities,
                    depth=snap.depth + 1,
                    max_depth=grants.max_depth,
                )
        except GraphrunnerError as exc:
            return ChildOutcome("failed", error=RunFailure(type="node_exception", message=str(exc)))
        paused = None
        if result.status == RunStatus.PAUSED.value and result.snapshot is not None:
            paused = PausedAt.of_child(result.snapshot, branch, index)
        return ChildOutcome(
            result.status, result.state, result.output, result.error, message=result.message, paused_at=paused
        )
