"""Foreach items on a worker: an item message's call, running one item, and its record.

An item message carries its call, signed by the worker that derived it from the run's pinned
graph and state (`signing.py`): a message whose signature does not verify is refused (dead-
lettered) unrun, and a verified call is checked against the run's capabilities again here. A
batched message (a node's `batch_size`) carries several items, each run, retried and recorded
on its own: one failing does not fail its batch-mates.

An item task never raises for its item's sake: it records an `ItemRecord` in Redis under its
index (the first record of an index wins, so a redelivered item is counted once). The save that
records the last item the step's chunk waits for (the hash reaches the message's `upto`: only
a new record grows it, so this happens once) sends the step's join; the sweeper sends it again
if this worker dies in between. An item that must wait (a retry backoff over `INLINE_WAIT`, a
durable sleep) returns without a record; its next attempt is sent as a durable timer, and its
record, when it comes, may be the one that completes the chunk.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from graphrunner.cluster.runs.items import ItemRecord, call_from, failed_record, record_of
from graphrunner.cluster.steps import redeliveries
from graphrunner.cluster.steps.redeliveries import infrastructure
from graphrunner.cluster.transport import acks
from graphrunner.cluster.transport.messages import ITEM_TASK, ItemMessage, Outgoing
from graphrunner.cluster.worker.heartbeat import Heartbeats
from graphrunner.cluster.worker.loops import ThreadLoops
from graphrunner.engine import ActionCall, ActionFailure, ActionOutcome
from graphrunner.engine.capabilities import denied
from graphrunner.services import Deferred, StepServices
from graphrunner.services.records import worker_name
from graphrunner.telemetry import metrics, spans
from graphrunner.tools import ToolContext
from graphrunner.tracebacks import format_traceback

if TYPE_CHECKING:
    from graphrunner.cluster.runs.context import Cluster

log = logging.getLogger("graphrunner.worker")
STATUS_TTL = 0.5  # seconds an item task trusts the run status it last read (cancel reaches items this late)


class ItemRunner:
    """Executes item messages: dispatch the call, record the result (or send the item again later)."""

    def __init__(
        self,
        cluster: Cluster,
        services: StepServices,
        *,
        heartbeats: Heartbeats,
        loops: ThreadLoops | None = None,
        max_redeliveries: int = 5,
    ) -> None:
        self.cluster = cluster
        self.store = cluster.store
        self.publisher = cluster.publisher
        self.services = services
        self.heartbeats = heartbeats
        self.loops = loops or ThreadLoops()
        self.max_redeliveries = max_redeliveries
        self._statuses: dict[str, tuple[float, str | None]] = {}
        self._grants: dict[str, tuple[str, ...]] = {}  # a run's capabilities, fixed when it starts

    # -- entry -------------------------------------------------------------------------------------

    def execute(
        self,
        msg: ItemMessage,
        *,
        redelivered: bool = False,
        queue: str | None = None,
        shadow: str | None = None,
    ) -> None:
        """Run the item (each item of a batch) and record its outcome; a wait sends it again as
        a durable timer; the item that completes the step's chunk sends the step's join.

        Items of a run that is no longer running (cancelled, failed) are skipped: nothing
        runs, nothing is recorded. `redelivered`: counted, and past `max_redeliveries` (its
        task keeps losing its worker) the item is recorded as failed without running it again.
        A message whose signature does not verify is refused unrun; a call the run's
        capabilities do not allow is recorded as `permission_denied`. An unexpected exception
        records the item failed (naming it); Redis or broker trouble (`infrastructure`) is
        raised for a requeue. `queue` (default: the cluster's) and `shadow` are where and under
        which name the item goes again when it waits.
        """
        queue = queue or self.cluster.settings.queue
        shadow = shadow or f"{msg.graph_id}:item"
        try:
            with self.heartbeats.beating(msg.run_id):
                self.loops.run(self._execute(msg, redelivered, queue, shadow))
        except Exception as exc:
            if infrastructure(exc):
                raise
            self._unexpected(msg, exc, queue)

    async def _execute(self, msg: ItemMessage, redelivered: bool, queue: str, shadow: str) -> None:
        if not self.publisher.signer.verify(msg):
            self._refuse(msg, queue)
            return
        if self._status(msg.run_id) != "running":
            return
        records: list[tuple[int, ItemRecord]] = []
        for one in msg.each():
            record = await self._run(one, redelivered, queue, shadow)
            if record is not None:
                records.append((one.index, record))
        self.save(msg, records, queue)

    async def _run(self, msg: ItemMessage, redelivered: bool, queue: str, shadow: str) -> ItemRecord | None:
        """Run one item: its record, or None when it goes on later (sent as a durable timer). An
        unexpected exception fails this item only (naming it); Redis or broker trouble is raised."""
        try:
            if redelivered:
                poisoned = self._poisoned(msg)
                if poisoned is not None:
                    return poisoned
            call = call_from(msg.call)
            refused = denied(self._capabilities(msg.run_id), call)
            if refused is not None:
                return failed_record(refused)
            return await self._dispatch(msg, call, queue, shadow)
        except Exception as exc:
            if infrastructure(exc):
                raise
            return failed_record(_raised(msg, exc))

    def _unexpected(self, msg: ItemMessage, exc: Exception, queue: str) -> None:
        """An exception no item should raise (a bug, a broken library): its items fail, naming it."""
        failure = _raised(msg, exc)
        if self._status(msg.run_id) == "running":
            self.save(msg, [(one.index, failed_record(failure)) for one in msg.each()], queue)

    async def _dispatch(
        self, msg: ItemMessage, call: ActionCall, queue: str, shadow: str
    ) -> ItemRecord | None:
        context = ToolContext(msg.run_id, msg.graph_id, call.node, msg.step, item_index=msg.index)
        began, worker = time.time(), worker_name()
        with spans.item(msg, call.node, worker) as traced:
            try:
                outcome = await self.services.durable_call(
                    msg.graph_hash, call, context, attempt=msg.attempt, timer=msg.timer
                )
            except Exception as exc:  # a bug or a broken tool: the item fails, the worker goes on
                outcome = ActionOutcome(failure=_raised(msg, exc))
            if not isinstance(outcome, Deferred):
                traced.ended(outcome.failure)
        if isinstance(outcome, Deferred):
            self.publisher.send(msg.run_id, [self._later(msg, outcome, queue, shadow)])
            return None
        metrics.item_done(msg.graph_id, call.node, "ok" if outcome.ok else "error", time.time() - began)
        return record_of(outcome).timed(began, worker)

    def save(self, msg: ItemMessage, records: Sequence[tuple[int, ItemRecord]], queue: str) -> None:
        """Record the items' outcomes in one write (their run makes progress); when one of them is
        the last record the step's chunk waits for, send the step's join (to `queue`)."""
        if records and self.cluster.save_items(msg.run_id, msg.tag, records, msg.upto, acks.current()):
            node = str(msg.call.get("node", ""))
            join = self.publisher.join(msg.run_id, msg.step - 1, msg.phase, queue, f"{msg.graph_id}:{node}")
            self.publisher.send(msg.run_id, [join])

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
        guard.refuse(reason, task=ITEM_TASK, queue=queue, body=[[msg.model_dump()], {}], store=self.store)

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

    def _poisoned(self, msg: ItemMessage) -> ItemRecord | None:
        """Count a redelivery of the item `msg`; past the cap, its failed record (not run again)."""
        counted = redeliveries.of_item(self.store, msg, self.max_redeliveries)
        if not counted.poison:
            return None
        failure = ActionFailure(
            "permanent",
            f"item {msg.index} was redelivered {counted.count} times without finishing (its task "
            f"keeps losing its worker: killed, out of memory?); not run again "
            f"(GRAPHRUNNER_MAX_REDELIVERIES={counted.limit})",
            "PoisonMessage",
        )
        return failed_record(failure)


def _raised(msg: ItemMessage, exc: Exception) -> ActionFailure:
    """The failure of item `msg` that raised `exc`, logged with its traceback."""
    log.exception("item %s of run %s raised", msg.index, msg.run_id)
    traceback = format_traceback(exc, user_frames=False)
    return ActionFailure("permanent", f"{type(exc).__name__}: {exc}", traceback=traceback)
