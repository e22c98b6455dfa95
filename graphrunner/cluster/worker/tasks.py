"""graphrunner's Celery tasks, thin: parse the message, hand it on, never drop it.

A task body never raises for a run's sake: run errors are committed as failed runs by the
executor, an exception from a step is a failed run too, and one from an item a failed item.
What does escape is trouble with Redis or the broker; the message then goes back on its queue
(`Reject(requeue=True)`), marked redelivered, so a message that keeps failing is counted and,
past GRAPHRUNNER_MAX_REDELIVERIES, fails its run (or its item) instead of looping.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from celery.exceptions import Reject

from graphrunner.cluster.transport import acks, guard
from graphrunner.cluster.transport.envelope import SENT_HEADER
from graphrunner.cluster.transport.messages import ITEM_TASK, STEP_TASK, ItemMessage, StepMessage
from graphrunner.errors import BadMessage

if TYPE_CHECKING:
    from celery import Celery

    from graphrunner.cluster.steps.executor import StepExecutor
    from graphrunner.cluster.steps.item_runner import ItemRunner

log = logging.getLogger("graphrunner.worker")
STRATEGY = "graphrunner.cluster.transport.guard:guarded"
REQUEST = "graphrunner.cluster.transport.guard:CommitAckedRequest"


def register_tasks(app: Celery, executor: StepExecutor, items: ItemRunner) -> None:
    """Register the step task (run by `executor`) and the item task (run by `items`) on `app`."""

    def handling(task: Any) -> AbstractContextManager[acks.Delivery | None]:
        """The task's message, for the commit (or item save) to acknowledge when the store can (its
        Redis is the broker: `Store.direct`)."""
        return acks.handling(acks.delivery_tag(task.request))

    def step(self: Any, *args: Any, **kwargs: Any) -> str:
        """Take one step of a run (thin: parse the message, let the executor do the rest)."""
        try:
            msg = StepMessage.parse(args, kwargs)
        except BadMessage as exc:
            body = [list(args), kwargs]
            guard.refuse(str(exc), task=STEP_TASK, queue=_queue(self), body=body, store=executor.store)
            return "bad_message"
        try:
            with handling(self) as delivery:
                handled = executor.execute(
                    msg, redelivered=_redelivered(self), sent=_sent(self), queue=_queue(self)
                )
            return acks.acked_outcome(handled.outcome, delivery)
        except Exception as exc:
            raise _requeue(f"step {msg.step + 1} of run {msg.run_id}", exc) from None

    def item(self: Any, *args: Any, **kwargs: Any) -> str:
        """Run one foreach item message (thin, like `step`); never fails for its items' sake."""
        try:
            msg = ItemMessage.parse(args, kwargs)
        except BadMessage as exc:
            body = [list(args), kwargs]
            guard.refuse(str(exc), task=ITEM_TASK, queue=_queue(self), body=body, store=items.store)
            return "bad_message"
        try:
            with handling(self) as delivery:
                shadow = self.request.shadow
                items.execute(msg, redelivered=_redelivered(self), queue=_queue(self), shadow=shadow)
            return acks.acked_outcome("done", delivery)
        except Exception as exc:
            raise _requeue(f"item {msg.index} of run {msg.run_id}", exc) from None

    # shared=False: a second worker app in one process must not get this one's tasks
    options: dict[str, Any] = {
        "bind": True,
        "acks_late": True,
        "reject_on_worker_lost": True,
        "shared": False,
        "ignore_result": True,
        "Strategy": STRATEGY,
        "Request": REQUEST,
    }
    app.task(name=STEP_TASK, **options)(step)
    # items store no Celery result: the join reads the item records graphrunner keeps, and the
    # item task that records a chunk's last item sends the join itself (no chord counter)
    app.task(name=ITEM_TASK, **options)(item)


def _requeue(what: str, exc: Exception) -> Reject:
    """Put the message back on its queue (marked redelivered): Redis or the broker is in trouble."""
    log.warning("%s could not be handled (%s: %s); it goes back on its queue", what, type(exc).__name__, exc)
    return Reject(f"{type(exc).__name__}: {exc}", requeue=True)


def _redelivered(task: Any) -> bool:
    """The broker delivered this message before without an acknowledgement (kombu sets the flag
    when it restores a message of a lost worker or requeues a rejected one)."""
    return bool((task.request.delivery_info or {}).get("redelivered"))


def _sent(task: Any) -> float | None:
    """When the message was sent (epoch s), from the `gr_sent` header graphrunner's envelopes carry."""
    headers = task.request.headers or {}
    sent = headers.get(SENT_HEADER, getattr(task.request, SENT_HEADER, None))
    return sent / 1000 if isinstance(sent, int) else None


def _queue(task: Any) -> str | None:
    info = task.request.delivery_info or {}
    return info.get("routing_key") if isinstance(info, dict) else None
