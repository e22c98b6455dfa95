"""A step's action, and the waits it comes back from: a retry backoff, a durable timer, a restart.

An action node's step dispatches its action here. A retry backoff longer than `INLINE_WAIT`
(kind `retry`) or a durable sleep (kind `timer`) suspends the step instead of holding a worker
slot: the suspending commit sends the step again as a durable timer, due when the wait is
over, and the step goes on from the attempt it stopped at (or with the timer's result). An
error hook's retry, and a resume, suspend the step on a `restart`: it starts afresh as the next
hook round, keeping the child runs of the attempt before it that completed (`prior`).
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, Literal

from graphrunner.cluster.steps.decisions import Complete, Decision, Suspend
from graphrunner.cluster.waits.base import Context, Step, WaitKind, fresh, latest
from graphrunner.engine import NoOutcome, RunSnapshot, StepPlan, Wait
from graphrunner.services import Deferred, tool_context
from graphrunner.services.records import AnyRecord, SleepRecord, retry_records, utcnow, worker_name


class RetryWait(Wait):
    """The action waits for its retry backoff (`due`), then tries attempt `attempt`."""

    waiting_for: ClassVar[str] = "a retry backoff"

    kind: Literal["retry"] = "retry"
    attempt: int = 1


class TimerWait(Wait):
    """The action sleeps durably until `due`; then `timer` (its result) stands for attempt `attempt`."""

    waiting_for: ClassVar[str] = "a durable timer (a sleep or a poll)"

    kind: Literal["timer"] = "timer"
    attempt: int = 1
    timer: dict[str, Any] | None = None


class RestartWait(Wait):
    """The step starts again as round `hook_round` (an error hook's retry, a resume), keeping the
    completed child runs of the attempt whose ids start with `prior`."""

    waiting_for: ClassVar[str] = "its step to start again"

    kind: Literal["restart"] = "restart"
    prior: str = ""


class Timers(WaitKind[RetryWait | TimerWait | RestartWait]):
    """An action step, its retry backoffs and durable sleeps, and a step that starts again."""

    plans = frozenset({"action"})
    waits = (RetryWait, TimerWait, RestartWait)

    async def start(self, ctx: Context, step: Step, hook_round: int, prior: str) -> Decision | None:
        """Dispatch the node's action from its first attempt (every plan it is asked for is one)."""
        return await act(ctx, step, RetryWait(hook_round=hook_round))

    async def join(
        self, ctx: Context, step: Step, wait: RetryWait | TimerWait | RestartWait, woken_by: str
    ) -> Decision:
        """The wait is over: the action goes on (or the step starts again)."""
        if isinstance(wait, RestartWait):
            return await fresh(ctx, step, wait.hook_round, wait.prior)
        return await act(ctx, step, wait)


def restart(snap: RunSnapshot, hook_round: int = 0) -> RestartWait:
    """The wait of a step of `snap` that starts again as round `hook_round`, keeping its
    completed child runs."""
    return RestartWait(hook_round=hook_round, prior=latest(snap))


async def act(ctx: Context, step: Step, wait: RetryWait | TimerWait) -> Decision:
    """Dispatch the node's action from `wait.attempt`; a long wait suspends the step."""
    snap, plan = step.snap, step.plan
    if plan.failure is not None or plan.call is None:  # e.g. denied: fail closed, run nothing
        return Complete(NoOutcome(), wait.hook_round)
    context = tool_context(snap, plan.node, plan.step)
    timer = wait.timer if isinstance(wait, TimerWait) else None
    outcome = await ctx.services.durable_call(
        snap.graph_hash, plan.call, context, attempt=wait.attempt, timer=timer
    )
    if isinstance(outcome, Deferred):
        return Suspend(deferred_wait(outcome, wait.hook_round), records=tuple(_wait_records(plan, outcome)))
    return Complete(outcome, wait.hook_round, outcome.retries)


def deferred_wait(deferred: Deferred, hook_round: int) -> RetryWait | TimerWait:
    """The wait of an action that asked to wait: a retry backoff, or a durable sleep."""
    due = time.time() + deferred.delay
    if deferred.kind == "timer":
        return TimerWait(hook_round=hook_round, due=due, attempt=deferred.attempt, timer=deferred.timer)
    return RetryWait(hook_round=hook_round, due=due, attempt=deferred.attempt)


def _wait_records(plan: StepPlan, deferred: Deferred) -> list[AnyRecord]:
    """The transcript records of a step that waits: its retried attempts, or its durable sleep."""
    worker = worker_name()
    records: list[AnyRecord] = [*retry_records(plan, deferred.retries, worker)]
    if deferred.kind == "timer":
        at = utcnow().isoformat()
        records.append(
            SleepRecord(step=plan.step, node=plan.node, sleep_s=deferred.delay, at=at, worker=worker)
        )
    return records
