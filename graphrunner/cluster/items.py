"""Foreach items on a worker: the item message's call, running one item, and its record.

An item task never raises: it records `{ok, result | error, attempts}` in Redis under its
index (the first record of an index wins, so a redelivered item is counted once) and
returns nothing, so Celery's chord only counts it.
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from typing import Any

from graphrunner.cluster.messages import ItemMessage
from graphrunner.engine import ActionCall, ActionFailure, ActionOutcome, ItemOutcome
from graphrunner.model import RetryPolicy
from graphrunner.runner import LocalRunner
from graphrunner.runner.dispatch import Deferred, dispatch
from graphrunner.store import RedisStore
from graphrunner.tools import ToolContext

INLINE_WAIT = 1.0  # retry waits up to this many seconds are slept in the task; longer ones reschedule


async def durable_call(
    runner: LocalRunner,
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
        runner.registry,
        call,
        replace(context, durable=True),
        attempt=attempt,
        inline_wait=INLINE_WAIT,
        cache=runner.cache_slot(graph_hash, call),
    )


def call_payload(call: ActionCall) -> dict[str, Any]:
    """An `ActionCall` as JSON for an item message."""
    data = asdict(call)
    data["retry"] = [p.model_dump(mode="json") for p in call.retry]
    return data


def call_from(payload: dict[str, Any]) -> ActionCall:
    """The `ActionCall` of an item message."""
    retry = tuple(RetryPolicy.model_validate(p) for p in payload.get("retry", ()))
    return ActionCall(**{**payload, "retry": retry})


def record_of(outcome: ActionOutcome) -> dict[str, Any]:
    """What is stored for one item."""
    record: dict[str, Any] = {"ok": outcome.ok, "attempts": outcome.attempts}
    if outcome.failure is not None:
        record["error"] = outcome.failure.to_dict()
    else:
        record["result"] = outcome.result
    if outcome.cache_hit:
        record["cache_hit"] = True
    return record


def failed_record(failure: ActionFailure) -> dict[str, Any]:
    """The record of an item that could not be dispatched (bad params, capability denied)."""
    return record_of(ActionOutcome(failure=failure))


def outcome_of(index: int, item: Any, record: dict[str, Any] | None) -> ItemOutcome:
    """An item's outcome from its stored record."""
    if record is None:
        failure = ActionFailure("permanent", f"item {index}: its result is missing", "MissingItemResult")
        return ItemOutcome(index, item, ActionOutcome(failure=failure))
    attempts = int(record.get("attempts", 1))
    if record.get("ok"):
        outcome = ActionOutcome(
            record.get("result"), attempts=attempts, cache_hit=bool(record.get("cache_hit"))
        )
        return ItemOutcome(index, item, outcome)
    error = record.get("error") or {}
    failure = ActionFailure(error.get("type", "permanent"), error.get("message", ""), error.get("error_type"))
    return ItemOutcome(index, item, ActionOutcome(failure=failure, attempts=attempts))


STATUS_TTL = 0.5  # seconds an item task trusts the run status it last read (cancel reaches items this late)


class ItemRunner:
    """Runs item messages: dispatch the call, record the result."""

    def __init__(self, store: RedisStore, runner: LocalRunner, *, max_redeliveries: int = 5) -> None:
        self.store = store
        self.runner = runner
        self.max_redeliveries = max_redeliveries
        self._statuses: dict[str, tuple[float, str | None]] = {}

    async def run(self, msg: ItemMessage, *, redelivered: bool = False) -> Deferred | None:
        """Run the item; a `Deferred` means: send it again later (nothing was recorded).

        Items of a run that is no longer running (cancelled, failed) are skipped: nothing
        runs, nothing is recorded. An item redelivered more than `max_redeliveries` times
        (its task keeps losing its worker) is recorded as failed without running it again.
        """
        if self._status(msg.run_id) != "running":
            return None
        if redelivered and self._poisoned(msg):
            return None
        call = call_from(msg.call)
        context = ToolContext(msg.run_id, msg.graph_id, call.node, msg.step, item_index=msg.index)
        outcome = await durable_call(
            self.runner, msg.graph_hash, call, context, attempt=msg.attempt, timer=msg.timer
        )
        if isinstance(outcome, Deferred):
            return outcome
        self.store.save_item(msg.run_id, msg.tag, msg.index, record_of(outcome))
        return None

    def _status(self, run_id: str) -> str | None:
        now = time.monotonic()
        seen = self._statuses.get(run_id)
        if seen is None or now - seen[0] > STATUS_TTL:
            if len(self._statuses) > 1000:
                self._statuses.clear()
            seen = self._statuses[run_id] = (now, self.store.status_of(run_id))
        return seen[1]

    def _poisoned(self, msg: ItemMessage) -> bool:
        count = self.store.count_redelivery(msg.run_id, f"item:{msg.tag}:{msg.index}")
        if count <= self.max_redeliveries:
            return False
        failure = ActionFailure(
            "permanent",
            f"item {msg.index} was redelivered {count} times without finishing (its task keeps "
            f"losing its worker: killed, out of memory?); not run again "
            f"(GRAPHRUNNER_MAX_REDELIVERIES={self.max_redeliveries})",
            "PoisonMessage",
        )
        self.store.save_item(msg.run_id, msg.tag, msg.index, failed_record(failure))
        return True


def later(msg: ItemMessage, deferred: Deferred) -> dict[str, Any]:
    """The payload of the item message that goes on after `deferred`'s wait."""
    timer = {"result": deferred.result} if deferred.kind == "timer" else None
    return msg.model_copy(update={"attempt": deferred.attempt, "timer": timer}).model_dump()
