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
from graphrunner.compiled import CompiledHook
from graphrunner.engine import (
    ActionCall,
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
from graphrunner.engine.capabilities import denied
from graphrunner.engine.outcomes import Control
from graphrunner.engine.step import foreach_fails
from graphrunner.errors import GraphrunnerError, RunError
from graphrunner.model import ForeachNode
from graphrunner.results import RunResult
from graphrunner.runner.cache import DEFAULT_TTL, CacheSlot, MemoryCache, ResultCache, cache_key
from graphrunner.runner.dispatch import Deferred, dispatch
from graphrunner.settings import Settings
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

    def __init__(
        self,
        registry: ToolRegistry | None = None,
        on_step: StepObserver | None = None,
        *,
        deployment_hooks: Sequence[CompiledHook] = (),
        cache: ResultCache | None = None,
        cache_ttl: int = DEFAULT_TTL,
        max_state_bytes: int | None = Settings.max_state_bytes,
        default_capabilities: Sequence[str] = Settings.default_capabilities,
    ) -> None:
        self.registry = registry or default_registry()
        self.on_step = on_step
        self.deployment_hooks = tuple(deployment_hooks)
        self.cache: ResultCache = cache if cache is not None else MemoryCache()
        self.cache_ttl = cache_ttl
        self.max_state_bytes = max_state_bytes
        self.default_capabilities = tuple(default_capabilities)

    async def invoke(
        self,
        graph: Graph,
        inputs: Mapping[str, Any] | None = None,
        *,
        state: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        capabilities: Sequence[str] | None = None,
        depth: int = 0,
    ) -> RunResult:
        """Start a run and drive it until it finishes or pauses (capabilities: the runner's default)."""
        snap = engine.begin(
            graph,
            inputs,
            run_id=run_id or uuid.uuid4().hex,
            state=state,
            capabilities=self.default_capabilities if capabilities is None else capabilities,
            depth=depth,
            max_state_bytes=self.max_state_bytes,
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
            plan, result, records = await self.advance(graph, snap)
            steps += records
            snap, exception = result.snapshot, result.exception
            if self.on_step:
                self.on_step(snap, records[-1])
            await self.after(graph, plan, result)
        return RunResult.from_snapshot(snap, steps, exception)

    async def advance(
        self, graph: Graph, snap: RunSnapshot, worker: str = "local"
    ) -> tuple[StepPlan, StepResult, list[dict[str, Any]]]:
        """Take one step from `snap`: plan, do its I/O, complete it; with its transcript records
        (one per retried attempt, then the step's own)."""
        started_at, started = utcnow().isoformat(), time.perf_counter()
        plan = engine.prepare(graph, snap, utcnow())
        result, retries = await self._step(graph, snap, plan)
        record = step_record(result, started_at, started, worker)
        return plan, result, [*retry_records(plan, retries, worker), record]

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

    async def _step(
        self, graph: Graph, snap: RunSnapshot, plan: StepPlan
    ) -> tuple[StepResult, tuple[dict[str, Any], ...]]:
        """Do the step's I/O and complete it; error hooks may answer retry (the step runs again)."""
        retries: tuple[dict[str, Any], ...] = ()
        for hook_round in range(MAX_HOOK_RETRIES + 1):
            outcome = await self._execute(graph, snap, plan)
            retries += getattr(outcome, "retries", ())
            result, answer = await self.finish(graph, snap, plan, outcome, hook_round)
            if answer != "retry":
                return result, retries
        return result, retries

    async def finish(
        self, graph: Graph, snap: RunSnapshot, plan: StepPlan, outcome: Outcome, hook_round: int = 0
    ) -> tuple[StepResult, Control | None]:
        """Complete the step with `outcome`, letting error hooks answer.

        Returns the result and `"retry"` when a hook asked to run the step again (at most
        `MAX_HOOK_RETRIES` times); a `continue`/`fail` answer is already applied.
        """
        limit = self.max_state_bytes
        result = engine.complete(graph, snap, plan, outcome, utcnow(), max_state_bytes=limit)
        if result.event.status != "error" or plan.kind == "limit" or result.event.error is None:
            return result, None
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
            return result, "retry"
        if answer in ("continue", "fail"):
            controlled = _with_control(outcome, answer)
            return engine.complete(graph, snap, plan, controlled, utcnow(), max_state_bytes=limit), None
        return result, None

    async def _execute(self, graph: Graph, snap: RunSnapshot, plan: StepPlan) -> Outcome:
        if plan.failure is not None or plan.kind in ("gate", "pause", "return", "limit"):
            return NoOutcome()
        if plan.kind == "action":
            assert plan.call is not None
            return await self.call(snap, plan.call, self._context(snap, plan))
        if plan.kind == "foreach":
            return await self._foreach(graph, snap, plan)
        return await self._child(graph, snap, plan)

    async def call(self, snap: RunSnapshot, call: ActionCall, context: ToolContext) -> ActionOutcome:
        """Dispatch `call` to the end in this process: waits are slept here (not durable)."""
        outcome = await dispatch(self.registry, call, context, cache=self.cache_slot(snap.graph_hash, call))
        while isinstance(outcome, Deferred):
            await asyncio.sleep(outcome.delay)
            if outcome.kind == "timer":
                return ActionOutcome(outcome.result, attempts=outcome.attempt, retries=outcome.retries)
            outcome = await dispatch(self.registry, call, context, attempt=outcome.attempt)
        return outcome

    def cache_slot(self, graph_hash: str, call: ActionCall) -> CacheSlot | None:
        """Where `call`'s result is cached, when its node has `cache_result`."""
        if not call.cache or call.tool not in self.registry:
            return None
        version = self.registry.get(call.tool).version
        return CacheSlot(self.cache, cache_key(graph_hash, call, version), self.cache_ttl)

    def _context(self, snap: RunSnapshot, plan: StepPlan, index: int | None = None) -> ToolContext:
        return tool_context(snap, plan.node, plan.step, index)

    async def _item(
        self, graph: Graph, snap: RunSnapshot, plan: StepPlan, index: int, item: Any
    ) -> ItemOutcome:
        call = engine.item_call(graph.nodes[plan.node], snap, index, item, utcnow())
        if isinstance(call, ActionFailure):
            return ItemOutcome(index, item, ActionOutcome(failure=call))
        return ItemOutcome(index, item, await self.call(snap, call, self._context(snap, plan, index)))

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
        too_deep = engine.too_deep(graph, snap)
        if too_deep is not None:
            return ChildOutcome("failed", error=too_deep)
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
        """Dispatch the graph's hooks for `event`, then the deployment's (which only observe).

        Returns the graph hooks' results; a hook that fails is logged and ignored.
        """
        answers = await self._fire(graph.hooks, event, snap, data, f"graph {graph.id}", checked=True)
        await self._fire(self.deployment_hooks, event, snap, data, "the deployment")
        return answers

    async def _fire(
        self,
        hooks: Sequence[CompiledHook],
        event: str,
        snap: RunSnapshot,
        data: dict[str, Any],
        owner: str,
        checked: bool = False,
    ) -> list[Any]:
        """Dispatch the hooks; with `checked` (a graph's own hooks) only those the run's
        capabilities allow."""
        answers: list[Any] = []
        if not hooks:
            return answers
        for call in engine.hook_calls(hooks, event, snap, utcnow(), **data):
            refused = denied(snap.capabilities, call) if checked else None
            if refused is not None:
                log.warning("hook %s of %s not run: %s", call.node, owner, refused.message)
                continue
            try:
                outcome = await self.call(
                    snap, call, ToolContext(snap.run_id, snap.graph_id, call.node, snap.step)
                )
            except Exception as exc:  # a hook must never break the run
                log.warning("hook %s of %s raised: %s", call.node, owner, exc)
                continue
            if outcome.failure is not None:
                log.warning("hook %s of %s failed: %s", call.node, owner, outcome.failure.message)
                continue
            answers.append(outcome.result)
        return answers


def _with_control(outcome: Outcome, answer: Any) -> Outcome:
    """The outcome with a hook's control answer attached."""
    return replace(outcome, control=answer)


def tool_context(
    snap: RunSnapshot, node: str, step: int, index: int | None = None, **extra: Any
) -> ToolContext:
    """What a tool is told about the dispatch: run, graph, node, step, item."""
    return ToolContext(
        run_id=snap.run_id, graph_id=snap.graph_id, node=node, step=step, item_index=index, **extra
    )


def step_record(result: StepResult, started_at: str, started: float, worker: str) -> dict[str, Any]:
    """The transcript record of a finished step."""
    return {
        **result.event.model_dump(),
        "started_at": started_at,
        "duration_ms": round((time.perf_counter() - started) * 1000, 3),
        "worker": worker,
    }


def retry_records(plan: StepPlan, retries: Sequence[dict[str, Any]], worker: str) -> list[dict[str, Any]]:
    """One transcript record per failed attempt that was retried."""
    return [
        {
            "step": plan.step,
            "node": plan.node,
            "status": "retry",
            "attempts": r["attempt"],
            "error": r["error"],
            "retry_in_s": r["retry_in_s"],
            "at": utcnow().isoformat(),
            "worker": worker,
        }
        for r in retries
    ]
