"""What a step does around the pure engine, the same in-process and on a worker.

`StepServices` dispatches actions (with retries and the result cache), fires hooks, and
completes a step through the engine, letting `error` hooks answer. The in-process runner
(`runner.local`) and the cluster's executor (`cluster.executor`) both take steps with it,
so a graph behaves the same wherever it runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from graphrunner import engine
from graphrunner.compiled import CompiledGraph, CompiledHook
from graphrunner.engine import (
    ActionCall,
    ActionOutcome,
    Control,
    Outcome,
    RunFailure,
    RunSnapshot,
    RunStatus,
    StepPlan,
    StepResult,
)
from graphrunner.services.cache import DEFAULT_TTL, CacheSlot, MemoryCache, ResultCache, cache_key
from graphrunner.services.dispatch import Deferred, dispatch
from graphrunner.services.hooks import Hooks
from graphrunner.services.records import utcnow
from graphrunner.settings import Settings
from graphrunner.tools import ToolContext, ToolPolicy, ToolRegistry, default_registry
from graphrunner.tracebacks import cause_traceback

MAX_HOOK_RETRIES = 3  # how often `error` hooks may answer `retry` for one step
INLINE_WAIT = 1.0  # on a worker, retry waits up to this many seconds are slept; longer ones suspend


class StepServices:
    """Tools, result cache, hooks and limits: everything a step needs besides the engine."""

    def __init__(
        self,
        registry: ToolRegistry | None = None,
        *,
        deployment_hooks: Sequence[CompiledHook] = (),
        cache: ResultCache | None = None,
        cache_ttl: int = DEFAULT_TTL,
        max_state_bytes: int | None = Settings.max_state_bytes,
        default_capabilities: Sequence[str] = Settings.local_capabilities,
        tool_policy: ToolPolicy | None = None,
    ) -> None:
        self.registry = registry or default_registry()
        self.cache: ResultCache = cache if cache is not None else MemoryCache()
        self.cache_ttl = cache_ttl
        self.max_state_bytes = max_state_bytes
        self.default_capabilities = tuple(default_capabilities)
        self.tool_policy = tool_policy or ToolPolicy()  # what tools may reach: the secure defaults
        self.hooks = Hooks(self.call, deployment_hooks)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        registry: ToolRegistry | None = None,
        *,
        cache: ResultCache | None = None,
        deployment_hooks: Sequence[CompiledHook] = (),
    ) -> StepServices:
        """Services with the limits, cache lifetime and the capabilities of a local run of `settings`
        (the in-process runner's default: GRAPHRUNNER_DEFAULT_CAPABILITIES when set, else `*`)."""
        return cls(
            registry,
            deployment_hooks=deployment_hooks,
            cache=cache,
            cache_ttl=settings.cache_ttl,
            max_state_bytes=settings.max_state_bytes,
            default_capabilities=settings.local_capabilities,
            tool_policy=ToolPolicy.from_settings(settings),
        )

    # -- run events --------------------------------------------------------------------------

    def env_failure(self, graph: CompiledGraph, snap: RunSnapshot) -> RunSnapshot | None:
        """The run failed with `env_missing` when an `env_requires` variable is not set, else None."""
        missing = engine.missing_env(graph)
        if not missing:
            return None
        message = f"missing environment variables: {', '.join(missing)}"
        error = RunFailure(type="env_missing", message=message, step=0)
        return snap.model_copy(update={"status": RunStatus.FAILED, "error": error})

    async def started(self, graph: CompiledGraph, snap: RunSnapshot) -> None:
        """Fire the `graph_started` hooks of a fresh run."""
        await self.hooks.fire(graph, "graph_started", snap, graph_id=graph.id)

    async def after(self, graph: CompiledGraph, plan: StepPlan, result: StepResult) -> None:
        """Fire the hooks that follow a committed step, and `graph_completed` at the end."""
        snap = result.snapshot
        if plan.kind == "limit":
            limit = graph.spec.config.max_steps
            await self.hooks.fire(
                graph, "limit", snap, limit_code="max_steps", current_value=snap.step, current_max=limit
            )
        elif result.event.status != "error" or snap.status is RunStatus.RUNNING:
            await self.hooks.fire(
                graph,
                "after_step",
                snap,
                node=plan.node,
                next_node=snap.node,
                step_count=snap.step,
                result=result.result,
            )
        await self.completed(graph, snap)

    async def completed(self, graph: CompiledGraph, snap: RunSnapshot) -> None:
        """Fire the `graph_completed` hooks when `snap` has finished."""
        if snap.status.finished:
            await self.hooks.fire(
                graph,
                "graph_completed",
                snap,
                graph_id=graph.id,
                steps=snap.step,
                status=snap.status.value,
                error=snap.error.to_dict() if snap.error is not None else None,
            )

    # -- completing a step --------------------------------------------------------------------

    def complete(
        self, graph: CompiledGraph, snap: RunSnapshot, plan: StepPlan, outcome: Outcome
    ) -> StepResult:
        """The engine's `complete`, with this deployment's state size limit; a run failed by user
        code the engine called (a routing function, a custom reducer) keeps its traceback."""
        result = engine.complete(graph, snap, plan, outcome, utcnow(), max_state_bytes=self.max_state_bytes)
        return with_cause_traceback(result)

    async def finish(
        self, graph: CompiledGraph, snap: RunSnapshot, plan: StepPlan, outcome: Outcome, hook_round: int = 0
    ) -> tuple[StepResult, Control | None]:
        """Complete the step with `outcome`, letting `error` hooks answer.

        Returns the result and `"retry"` when a hook asked to run the step again (at most
        `MAX_HOOK_RETRIES` times); a `continue`/`fail` answer is already applied.
        """
        result = self.complete(graph, snap, plan, outcome)
        error = result.event.error
        if result.event.status != "error" or plan.kind == "limit" or error is None:
            return result, None
        answers = await self.hooks.fire(
            graph,
            "error",
            snap,
            node=plan.node,
            error=error.to_dict(),
            classification=error.type,
            step_count=plan.step,
        )
        answer = engine.first_answer(answers)
        if answer == "retry" and hook_round < MAX_HOOK_RETRIES:
            return result, "retry"
        if answer in ("continue", "fail"):
            return self.complete(graph, snap, plan, replace(outcome, control=answer)), None
        return result, None

    # -- dispatching actions --------------------------------------------------------------------

    async def call(self, snap: RunSnapshot, call: ActionCall, context: ToolContext) -> ActionOutcome:
        """Dispatch `call` to the end in this process: waits are slept here (not durable)."""
        context = replace(context, policy=self.tool_policy)
        outcome = await dispatch(self.registry, call, context, cache=self.cache_slot(snap.graph_hash, call))
        while isinstance(outcome, Deferred):
            await asyncio.sleep(outcome.delay)
            if outcome.kind == "timer":
                return ActionOutcome(outcome.result, attempts=outcome.attempt, retries=outcome.retries)
            outcome = await dispatch(self.registry, call, context, attempt=outcome.attempt)
        return outcome

    async def durable_call(
        self,
        graph_hash: str,
        call: ActionCall,
        context: ToolContext,
        *,
        attempt: int = 1,
        timer: dict[str, Any] | None = None,
    ) -> ActionOutcome | Deferred:
        """Dispatch `call` on a worker from `attempt`: a wait over `INLINE_WAIT` (or a durable
        sleep) comes back `Deferred`; a `timer` that has come due stands for the tool's result."""
        if timer is not None:
            return ActionOutcome(timer.get("result"), attempts=attempt)
        return await dispatch(
            self.registry,
            call,
            replace(context, durable=True, policy=self.tool_policy),
            attempt=attempt,
            inline_wait=INLINE_WAIT,
            cache=self.cache_slot(graph_hash, call),
        )

    def cache_slot(self, graph_hash: str, call: ActionCall) -> CacheSlot | None:
        """Where `call`'s result is cached, when its node has `cache_result`."""
        if not call.cache or call.tool not in self.registry:
            return None
        version = self.registry.get(call.tool).version
        return CacheSlot(self.cache, cache_key(graph_hash, call, version), self.cache_ttl)


def tool_context(
    snap: RunSnapshot, node: str, step: int, index: int | None = None, **extra: Any
) -> ToolContext:
    """What a tool is told about the dispatch: run, graph, node, step, item."""
    return ToolContext(
        run_id=snap.run_id, graph_id=snap.graph_id, node=node, step=step, item_index=index, **extra
    )


def with_cause_traceback(result: StepResult) -> StepResult:
    """`result` with the traceback of the user code behind its failing error, in the step's record
    and the run's error (the engine formats none: that reads source files)."""
    error = result.event.error
    if result.exception is None or error is None or error.traceback is not None:
        return result
    text = cause_traceback(result.exception)
    if text is None:
        return result
    error = error.model_copy(update={"traceback": text})
    snapshot = result.snapshot
    if snapshot.error is not None:
        snapshot = snapshot.model_copy(
            update={"error": snapshot.error.model_copy(update={"traceback": text})}
        )
    return replace(result, snapshot=snapshot, event=result.event.model_copy(update={"error": error}))
