"""Calling a tool: timeout, error classification, and retries with exponential, jittered backoff.

Shared by the in-process runner and the Celery tasks, so both classify and retry the same
way; on a worker, long waits come back as `Deferred` so the step is rescheduled instead.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from graphrunner.engine import ActionCall, ActionFailure, ActionOutcome, Retried
from graphrunner.errors import PermissionDenied, ToolError, UnknownTool
from graphrunner.limits import NESTING, NON_FINITE, NOT_DATA, finite_copy, value_problem
from graphrunner.model import RetryPolicy
from graphrunner.rye.results import reported_error, unwrap
from graphrunner.services.cache import CacheSlot
from graphrunner.tools import Defer, ToolContext, ToolRegistry
from graphrunner.tracebacks import format_traceback

Sleep = Callable[[float], Awaitable[Any]]


def classify(exc: BaseException) -> ActionFailure:
    """The classification of an exception raised while dispatching a tool.

    A `ToolError` keeps the traceback its tool gave it (a Python tool's function); any other
    exception a tool let escape keeps its own, from the tool's code on.
    """
    if isinstance(exc, ToolError):
        return ActionFailure(exc.classification, str(exc), exc.error_type, exc.traceback)
    if isinstance(exc, PermissionDenied):
        return ActionFailure("permission_denied", str(exc), "PermissionDenied")
    if isinstance(exc, UnknownTool):
        return ActionFailure("validation", str(exc), "UnknownTool")
    kind = "transient" if isinstance(exc, ConnectionError) else "permanent"
    return ActionFailure(kind, f"{type(exc).__name__}: {exc}", type(exc).__name__, format_traceback(exc))


def policy_for(policies: tuple[RetryPolicy, ...], failure: ActionFailure) -> RetryPolicy | None:
    """The first policy that matches the failure's classification or error type."""
    for policy in policies:
        if policy.matches(failure.classification, failure.error_type):
            return policy
    return None


def retry_delay(policy: RetryPolicy, attempt: int) -> float:
    """Seconds to wait after failed attempt `attempt`: `initial * multiplier**(attempt - 1)` capped
    by max_delay, plus a uniform jitter in [0, jitter], capped by max_delay again."""
    try:
        backoff = min(policy.initial * policy.multiplier ** (attempt - 1), policy.max_delay)
    except OverflowError:  # a huge multiplier or attempt: the cap
        backoff = policy.max_delay
    return min(backoff + policy.jitter * random.random(), policy.max_delay)


@dataclass(frozen=True)
class Deferred:
    """An action that must wait `delay` seconds: a retry backoff (`kind` retry) or a durable
    sleep (`kind` timer, whose `result` stands when it comes due). `attempt` is the next
    attempt (retry) or the one that asked to wait (timer); `retries` the failed attempts so far."""

    kind: str
    delay: float
    attempt: int
    retries: tuple[Retried, ...] = ()
    result: Any = None

    @property
    def timer(self) -> dict[str, Any] | None:
        """What a durable sleep leaves for when it comes due (`{"result": ...}`); None for a retry."""
        return {"result": self.result} if self.kind == "timer" else None


async def call_tool(registry: ToolRegistry, call: ActionCall, context: ToolContext) -> Any:
    """Run one attempt; the node's timeout becomes a `timeout` ToolError."""
    tool = registry.get(call.tool)
    if call.timeout is None:
        return await tool.run(dict(call.params), context)
    try:
        return await asyncio.wait_for(tool.run(dict(call.params), context), call.timeout)
    except TimeoutError:
        raise ToolError(
            f"node '{call.node}': tool '{call.tool}' exceeded its timeout of {call.timeout:g}s",
            error_type="Timeout",
            classification="timeout",
        ) from None


def walker_result(call: ActionCall, result: Any) -> Any:
    """A Rye graph's result as the walker unwraps it; a `permanent` ToolError when it reports
    failure (`status: error`, `success: false`). Other graphs' results pass unchanged."""
    if not call.rye:
        return result
    unwrapped = unwrap(result)
    error = reported_error(unwrapped)
    if error is not None:
        raise ToolError(f"node '{call.node}': tool '{call.tool}' failed: {error}", error_type="ToolFailed")
    return unwrapped


def check_serializable(call: ActionCall, result: Any) -> Any:
    """`result` when it is JSON data a run may hold (`limits.value_problem`), with NaN and
    ±Infinity as null when the graph asks for that (`call.non_finite`); else a ToolError of the
    problem's category (`limit_exceeded`, `non_finite_number`; `validation` for the rest)."""
    found = value_problem(result)
    if found is None:
        return result
    if found.category == NON_FINITE and call.non_finite == "null":
        return check_serializable(call, finite_copy(result))
    item = "" if call.item_index is None else f" (item {call.item_index})"
    raise ToolError(
        f"node '{call.node}'{item}: tool '{call.tool}' returned a result that is not "
        f"JSON-serializable: {found.describe('result')}",
        error_type=RESULT_ERRORS.get(found.category, "UnserializableResult"),
        classification=found.category if found.category != NOT_DATA else "validation",
    )


RESULT_ERRORS = {NON_FINITE: "NonFiniteNumber", NESTING: "NestedTooDeeply"}


async def dispatch(
    registry: ToolRegistry,
    call: ActionCall,
    context: ToolContext,
    *,
    sleep: Sleep = asyncio.sleep,
    attempt: int = 1,
    inline_wait: float = math.inf,
    cache: CacheSlot | None = None,
) -> ActionOutcome | Deferred:
    """Run `call` from `attempt` on with its retry policies; never raises for an action error.

    A retry wait up to `inline_wait` seconds is slept here; a longer one, or a tool asking
    to `Defer`, comes back as `Deferred` for the caller to reschedule.
    """
    if cache is not None:
        hit, value = cache.cache.cache_get(cache.digest)
        if hit:
            return ActionOutcome(result=value, attempts=0, cache_hit=True)
    retries: list[Retried] = []
    while True:
        try:
            ctx = replace(context, attempt=attempt, timeout=call.timeout)
            result = walker_result(call, await call_tool(registry, call, ctx))
            result = check_serializable(call, result)
        except Defer as wait:
            return Deferred("timer", wait.seconds, attempt, tuple(retries), wait.result)
        except Exception as exc:  # every action error is classified, none escapes
            failure = classify(exc)
        else:
            if cache is not None:
                cache.cache.cache_set(cache.digest, result, cache.ttl)
            return ActionOutcome(result=result, attempts=attempt, retries=tuple(retries))
        policy = policy_for(call.retry, failure)
        if policy is None or attempt >= policy.max_attempts:
            return ActionOutcome(failure=failure, attempts=attempt, retries=tuple(retries))
        delay = retry_delay(policy, attempt)
        retries.append(Retried(attempt, failure, round(delay, 3)))
        if delay > inline_wait:
            return Deferred("retry", delay, attempt + 1, tuple(retries))
        await sleep(delay)
        attempt += 1
