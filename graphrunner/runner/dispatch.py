"""Calling a tool: timeout, error classification, and retries with tenacity's wait strategies.

Shared by the in-process runner and (later) the Celery tasks, so both classify and retry
the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from tenacity import RetryCallState, wait_exponential, wait_random

from graphrunner.engine import ActionCall, ActionFailure, ActionOutcome
from graphrunner.errors import PermissionDenied, ToolError, UnknownTool
from graphrunner.model import RetryPolicy
from graphrunner.tools import ToolContext, ToolRegistry

Sleep = Callable[[float], Awaitable[Any]]


def classify(exc: BaseException) -> ActionFailure:
    """The classification of an exception raised while dispatching a tool."""
    if isinstance(exc, ToolError):
        return ActionFailure(exc.classification, str(exc), exc.error_type)
    if isinstance(exc, PermissionDenied):
        return ActionFailure("permission_denied", str(exc), "PermissionDenied")
    if isinstance(exc, UnknownTool):
        return ActionFailure("validation", str(exc), "UnknownTool")
    if isinstance(exc, ConnectionError):
        return ActionFailure("transient", f"{type(exc).__name__}: {exc}", type(exc).__name__)
    return ActionFailure("permanent", f"{type(exc).__name__}: {exc}", type(exc).__name__)


def policy_for(policies: tuple[RetryPolicy, ...], failure: ActionFailure) -> RetryPolicy | None:
    """The first policy that matches the failure's classification or error type."""
    for policy in policies:
        if policy.matches(failure.classification, failure.error_type):
            return policy
    return None


def retry_delay(policy: RetryPolicy, attempt: int) -> float:
    """Seconds to wait after failed attempt `attempt`: exponential, jittered, capped by max_delay."""
    wait = wait_exponential(multiplier=policy.initial, exp_base=policy.multiplier, max=policy.max_delay)
    if policy.jitter > 0:
        wait = wait + wait_random(0, policy.jitter)  # type: ignore[assignment]
    state = RetryCallState(None, None, (), {})  # type: ignore[arg-type]
    state.attempt_number = attempt
    return float(min(wait(state), policy.max_delay))


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


async def dispatch(
    registry: ToolRegistry,
    call: ActionCall,
    context: ToolContext,
    sleep: Sleep = asyncio.sleep,
) -> ActionOutcome:
    """Run `call` with its retry policies; never raises for an action error."""
    attempt = 1
    while True:
        try:
            ctx = ToolContext(**{**context.__dict__, "attempt": attempt, "timeout": call.timeout})
            return ActionOutcome(result=await call_tool(registry, call, ctx), attempts=attempt)
        except Exception as exc:  # every action error is classified, none escapes
            failure = classify(exc)
        policy = policy_for(call.retry, failure)
        if policy is None or attempt >= policy.max_attempts:
            return ActionOutcome(failure=failure, attempts=attempt)
        await sleep(retry_delay(policy, attempt))
        attempt += 1
