"""Foreach items on a worker: an item message's call, running one item, and its record.

An item message carries its call, signed by the worker that derived it from the run's pinned
graph and state (`signing.py`): a message whose signature does not verify is refused (dead-
lettered) unrun, and a verified call is checked against the run's capabilities again here.

An item task never raises: it records `{ok, result | error, attempts}` in Redis under its
index (the first record of an index wins, so a redelivered item is counted once) and
returns nothing, so Celery's chord only counts it. An item that must wait (a retry backoff
over `INLINE_WAIT`, a durable sleep) returns without a record; its next attempt is sent as
a durable timer, outside the chord, and the join waits for its record.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from graphrunner.cluster.transport.messages import ITEM_TASK, ItemMessage, Outgoing
from graphrunner.engine import ActionCall, ActionFailure, ActionOutcome, ItemOutcome
from graphrunner.engine.capabilities import denied
from graphrunner.model import RetryPolicy
from graphrunner.services import Deferred, StepServices
from graphrunner.tools import ToolContext
from graphrunner.tracebacks import format_traceback

if TYPE_CHECKING:
    from graphrunner.cluster.runs.context import Cluster

log = logging.getLogger("graphrunner.worker")
STATUS_TTL = 0.5  # seconds an item task trusts the run status it last read (cancel reaches items this late)


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
    """The record of an item that could not be dispatched (bad params, capability denied, poison)."""
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
    return ItemOutcome(index, item, ActionOutcome(failure=ActionFailure.from_dict(error), attempts=attempts))


class ItemRunner:
    """Runs item messages: dispatch the call, record the result (or send the item again later)."""

    def __init__(self, cluster: Cluster, services: StepServices, *, max_redeliveries: int = 5) -> None:
        self.cluster = cluster
        self.store = cluster.store
        self.publisher = cluster.publisher
        self.services = services
        self.max_redeliveries = max_redeliveries
        self._statuses: dict[str, tuple[float, str | None]] = {}
        self._grants: dict[str, tuple[str, ...]] = {}  # a run's capabilities, fixed when it starts

    async def run(self, msg: ItemMessage, *, redelivered: bool = False, queue: str, shadow: str) -> None:
        """Run the item and record its outcome; a wait sends it again as a durable timer.

        Items of a run that is no longer running (cancelled, failed) are skipped: nothing
        runs, nothing is recorded. An item redelivered more than `max_redeliveries` times
        (its task keeps losing its worker) is recorded as failed without running it again.
        A message whose signature does not verify is refused unrun; a call the run's
        capabilities do not allow is recorded as `permission_denied`.
        """
        if not self.publisher.signer.verify(msg):
            self._refuse(msg, queue)
            return
        if self._status(msg.run_id) != "running":
            return
        if redelivered and self._poisoned(msg):
            return
        call = call_from(msg.call)
        refused = denied(self._capabilities(msg.run_id), call)
        if refused is not None:
            self.save(msg, failed_record(refused))
            return
        await self._dispatch(msg, call, queue, shadow)

    async def _dispatch(self, msg: ItemMessage, call: ActionCall, queue: str, shadow: str) -> None:
        context = ToolContext(msg.run_id, msg.graph_id, call.node, msg.step, item_index=msg.index)
        try:
            outcome = await self.services.durable_call(
                msg.graph_hash, call, context, attempt=msg.attempt, timer=msg.timer
            )
        except Exception as exc:  # a bug or a broken tool: the item fails, the worker goes on
            log.exception("item %s of run %s raised", msg.index, msg.run_id)
            traceback = format_traceback(exc, user_frames=False)
            failure = ActionFailure("permanent", f"{type(exc).__name__}: {exc}", traceback=traceback)
            outcome = ActionOutcome(failure=failure)
        if isinstance(outcome, Deferred):
            self.publisher.send(msg.run_id, [self._later(msg, outcome, queue, shadow)])
            return
        self.save(msg, record_of(outcome))

    def save(self, msg: ItemMessage, record: dict[str, Any]) -> None:
        """Record the item's outcome (its run makes progress)."""
        self.cluster.save_item(msg.run_id, msg.tag, msg.index, record)

    def _later(self, msg: ItemMessage, deferred: Deferred, queue: str, shadow: str) -> Outgoing:
        """The item message that goes on after `deferred`'s wait, as a durable timer."""
        payload = msg.model_copy(update={"attempt": deferred.attempt, "timer": deferred.timer}).model_dump()
        return self.publisher.item(payload, queue, shadow, due=time.time() + deferred.delay)

    def _refuse(self, msg: ItemMessage, queue: str) -> None:
        from graphrunner.cluster.transport import (
            guard,  # Celery's consumer: imported only by a worker that refuses
        )

        reason = (
            f"foreach item message for run {msg.run_id} (item {msg.index}) does not carry a valid "
            "signature under the cluster's key: forged or altered, not run"
        )
        guard.refuse(reason, task=ITEM_TASK, queue=queue, body=[[msg.model_dump()], {}])

    def _capabilities(self, run_id: str) -> tuple[str, ...]:
        granted = self._grants.get(run_id)
        if granted is None:
            snap = self.store.load_run(run_id)
            granted = tuple(snap.capabilities) if snap is not None else ()
            if len(self._grants) > 1000:
                self._grants.clear()
            self._grants[run_id] = granted
        return granted

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
        self.save(msg, failed_record(failure))
        return True
