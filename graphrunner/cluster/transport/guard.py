"""Poison messages never stop a worker: what cannot be read is dead-lettered and acknowledged.

Anything on the queue can be wrong: not JSON, a kombu envelope without properties, a body
that is not base64, a content type Celery would trust unread (`application/data`, empty),
a task name nobody serves, arguments of the wrong shape. Celery and kombu crash the
consumer on several of these (celery/celery#7975: the worker exits with status 0 and the
message, restored, kills the next worker). graphrunner checks every message at three
depths before it can do harm:

1. `RedisTransport` (the Redis broker's transport): a queue entry that is not a JSON kombu
   envelope is refused before kombu builds a message of it;
2. `guarded` (the strategy of graphrunner's tasks): a message whose content type, body or
   arguments do not make a step or item message is refused before Celery's strategy reads it;
3. `GuardedConsumer`: unknown tasks, invalid and undecodable messages that Celery itself
   notices are refused instead of being dropped (or crashing on a missing header).

A refused message is counted and kept in the store's dead-letter list (`graphrunner queues
--dead` shows it), logged once with what was wrong, and acknowledged: it is never redelivered.

The consumer also names the cause when RabbitMQ closes its channel because a message was held
longer than the broker's `consumer_timeout` (the worker then reconnects, see `cluster/transport/app.py`),
and leaves out Celery's native delayed delivery (ETA messages on quorum queues): unused.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time
from collections.abc import Callable
from queue import Empty
from typing import Any

import redis
from celery.worker.consumer import Consumer
from celery.worker.request import Request
from celery.worker.strategy import default as default_strategy
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual

from graphrunner.cluster.transport.acks import was_acked
from graphrunner.cluster.transport.messages import ITEM_TASK, STEP_TASK, ItemMessage, StepMessage
from graphrunner.errors import BadMessage
from graphrunner.store import DeadLetter, Store
from graphrunner.telemetry import metrics

log = logging.getLogger("graphrunner.worker")
CONSUMER_TIMED_OUT = (
    "RabbitMQ closed this worker's channel: a step or foreach item held its message longer than "
    "the broker's consumer_timeout (%s). The worker reconnects and the steps in flight finish, "
    "but the broker delivers their messages again: those steps run again (only one commit "
    "counts). Raise the broker's consumer_timeout above the longest node timeout (rabbitmq.conf, "
    "or a consumer-timeout policy from RabbitMQ 3.12) and set GRAPHRUNNER_CONSUMER_TIMEOUT to it: "
    "workers then refuse graphs whose nodes may run longer"
)
BODY_KEEP = 4096  # characters of a refused message's body kept in its dead letter
SINK: list[Store] = []  # where this process's worker keeps dead letters (set when it starts)


def refuse(
    reason: str,
    *,
    task: str | None,
    queue: str | None,
    body: Any,
    headers: Any = None,
    cause: str = "bad_message",
    store: Store | None = None,
) -> None:
    """Count and keep a refused message (in `store`, else the worker's), and log it once; never
    raises. `cause` is the bounded metric label (bad_message, bad_envelope, not_json, not_a_task,
    unknown_task, invalid_task, undecodable); `reason` says what was wrong. A task refusing its
    message passes its store: a prefork pool process forked before the worker set its own."""
    metrics.dead_lettered(cause)
    text = body if isinstance(body, str) else _text(body)
    letter = DeadLetter(
        reason=reason[:1000],
        task=str(task)[:200] if task is not None else None,
        queue=str(queue)[:200] if queue is not None else None,
        at=int(time.time() * 1000),
        body=text[:BODY_KEEP],
        headers=headers if isinstance(headers, dict) else {},
    )
    total = None
    sink = store if store is not None else (SINK[-1] if SINK else None)
    try:
        if sink is not None:
            total = sink.dead_letter(letter)
    except Exception as exc:  # the store is away: the log line is all that is left
        log.error("could not keep a dead letter (%s)", exc)
    log.error("refused a message on queue %s (task %s): %s [dead letters: %s]", queue, task, reason, total)


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    try:
        return json.dumps(value, default=repr)
    except (TypeError, ValueError, RecursionError):
        return repr(value)[:BODY_KEEP]


# -- 1. the transport --------------------------------------------------------------------------------


def envelope_problem(raw: Any) -> str | None:
    """Why a decoded queue entry is not a kombu envelope kombu can build a message of (None: it is)."""
    if not isinstance(raw, dict):
        return f"the queue entry is a JSON {type(raw).__name__}, not a kombu envelope"
    properties = raw.get("properties")
    if not isinstance(properties, dict):
        return "the envelope has no 'properties' mapping"
    if not isinstance(properties.get("delivery_tag"), str):
        return "the envelope's properties have no string 'delivery_tag'"
    if not isinstance(properties.get("delivery_info", {}), dict):
        return "the envelope's 'delivery_info' is not a mapping"
    if not isinstance(raw.get("headers", {}), dict):
        return "the envelope's 'headers' is not a mapping"
    for key in ("content-type", "content-encoding"):
        if not isinstance(raw.get(key, ""), str):
            return f"the envelope's '{key}' is not a string"
    return _body_problem(raw.get("body"), properties.get("body_encoding"))


def _body_problem(body: Any, encoding: Any) -> str | None:
    if body is None:
        return None
    if not isinstance(body, str):
        return f"the envelope's body is a {type(body).__name__}, not text"
    if encoding == "base64":
        try:
            base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            return "the envelope's body is not base64 as its 'body_encoding' says"
    elif encoding not in (None, ""):
        return f"unknown body encoding {encoding!r:.40}"
    return None


class GuardedQoS(kombu_redis.QoS):
    """kombu's Redis acknowledgements, surviving a Redis that refuses writes (maxmemory).

    kombu lets such an error escape into the worker's event loop, which stops the worker.
    Here the message is only forgotten by this worker: it stays recorded as unacknowledged
    in Redis, nobody vouches for it any more, and it is delivered again after the
    visibility timeout (a finished step's message is then dropped as stale).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]
        self._committed: set[str] = set()

    def acked_at_commit(self, delivery_tag: str) -> None:
        """The task's commit removed `delivery_tag` from Redis's unacknowledged messages (see
        `acks`): its acknowledgement has only this worker's own bookkeeping left to do."""
        self._committed.add(delivery_tag)

    def ack(self, delivery_tag: str) -> None:
        """Acknowledge; if Redis refuses, leave the message to come back."""
        if delivery_tag in self._committed:
            self._committed.discard(delivery_tag)
            virtual.QoS.ack(self, delivery_tag)  # type: ignore[no-untyped-call]
            return
        try:
            super().ack(delivery_tag)  # type: ignore[no-untyped-call]
        except redis.ResponseError as exc:
            log.warning("could not acknowledge message %s (%s); it will come back", delivery_tag, exc)
            virtual.QoS.ack(self, delivery_tag)  # type: ignore[no-untyped-call]

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        """Reject (requeue); if Redis refuses, leave the message to come back."""
        self._committed.discard(delivery_tag)
        try:
            super().reject(delivery_tag, requeue=requeue)  # type: ignore[no-untyped-call]
        except redis.ResponseError as exc:
            log.warning("could not requeue message %s (%s); it will come back", delivery_tag, exc)
            virtual.QoS.ack(self, delivery_tag)  # type: ignore[no-untyped-call]


class GuardedChannel(kombu_redis.Channel):
    """kombu's Redis channel, refusing queue entries that are not kombu envelopes."""

    QoS = GuardedQoS

    def basic_consume(self, queue: str, no_ack: bool, callback: Any, consumer_tag: str, **kwargs: Any) -> Any:
        """Consume from `queue`, checking each entry before kombu builds its message."""
        result = super().basic_consume(queue, no_ack, callback, consumer_tag, **kwargs)  # type: ignore[no-untyped-call]
        inner: Callable[[Any], Any] = self.connection._callbacks[queue]

        def guarded(raw: Any) -> Any:
            problem = envelope_problem(raw)
            if problem is not None:
                refuse(problem, task=_header(raw, "task"), queue=queue, body=raw, cause="bad_envelope")
                return None
            return inner(raw)

        self.connection._callbacks[queue] = guarded
        return result

    def _brpop_read(self, **options: Any) -> Any:
        """Take the next entry; one that is not JSON is refused (it is gone from the queue)."""
        try:
            return super()._brpop_read(**options)  # type: ignore[no-untyped-call]
        except (Empty, *self.connection_errors):
            raise
        except redis.ResponseError as exc:  # taken, but Redis refused to record it (maxmemory)
            log.error(
                "a message taken off the queue could not be recorded (%s); the sweeper sends it again", exc
            )
            raise Empty() from None
        except Exception as exc:
            problem = f"a queue entry that is not a JSON kombu envelope: {exc}"
            refuse(problem, task=None, queue=None, body="", cause="not_json")
            raise Empty() from None


class RedisTransport(kombu_redis.Transport):
    """kombu's Redis transport with `GuardedChannel`."""

    Channel = GuardedChannel


def _header(raw: Any, name: str) -> Any:
    headers = raw.get("headers") if isinstance(raw, dict) else None
    return headers.get(name) if isinstance(headers, dict) else None


# -- 2. the strategy of graphrunner's tasks -------------------------------------------------------------


def message_problem(task: str, message: Any) -> str | None:
    """Why `message` is not a graphrunner step or item message (None: it is).

    The body is decoded once, by kombu (`message.decode()` keeps what Celery's strategy reads
    next). An item message's one mapping is validated by its task, once, where it is used (the
    task refuses it as this would); here only its shape is checked.
    """
    if message.content_type != "application/json":
        return f"content type {message.content_type!r:.60} (graphrunner's tasks take application/json only)"
    try:
        body = message.decode()
    except Exception as exc:  # kombu's DecodeError, or anything its JSON decoder raised
        return f"the body is not JSON: {exc}"
    if not (
        isinstance(body, list) and len(body) == 3 and isinstance(body[1], dict) and isinstance(body[2], dict)
    ):
        return "the body is not Celery's [args, kwargs, embed]"
    try:
        if task == STEP_TASK:
            StepMessage.parse(body[0], body[1])
        else:
            ItemMessage.shape(body[0], body[1])
    except BadMessage as exc:
        return str(exc)
    return None


def guarded(task: Any, app: Any, consumer: Any, **kwargs: Any) -> Callable[..., Any]:
    """Celery's default strategy for `task`, behind `message_problem`."""
    inner = default_strategy(task, app, consumer, **kwargs)

    def handle(message: Any, body: Any, ack: Any, reject: Any, callbacks: Any, **kw: Any) -> Any:
        problem = message_problem(task.name, message)
        if problem is None:
            try:
                return inner(message, body, ack, reject, callbacks, **kw)
            except Exception as exc:  # Celery could not build a request of it
                problem = f"Celery cannot read it: {type(exc).__name__}: {exc}"
        refuse(problem, task=task.name, queue=_queue(message), body=message.body, headers=message.headers)
        message.ack()
        return None

    return handle


class CommitAckedRequest(Request):  # type: ignore[misc]
    """Celery's request of a graphrunner task, whose message its commit may have acknowledged.

    Celery subclasses a task's request class per worker (`create_request_cls`) and overrides
    `on_success` there, so the check is put in front of the instance's own handler.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        on_success: Callable[..., Any] = self.on_success

        def succeeded(failed__retval__runtime: Any, **kw: Any) -> Any:
            failed, retval, _ = failed__retval__runtime
            if not failed and was_acked(retval):
                _acked_at_commit(self._message)
            return on_success(failed__retval__runtime, **kw)

        self.__dict__["on_success"] = succeeded  # what the pool calls back (`execute_using_pool`)


def _acked_at_commit(message: Any) -> None:
    """Tell the channel's QoS that `message` is acknowledged in Redis already."""
    qos = getattr(getattr(message, "channel", None), "qos", None)
    mark = getattr(qos, "acked_at_commit", None)
    if mark is not None:
        mark(message.delivery_tag)


def _queue(message: Any) -> str | None:
    info = getattr(message, "delivery_info", None)
    return info.get("routing_key") if isinstance(info, dict) else None


# -- 3. the consumer ------------------------------------------------------------------------------------


class GuardedConsumer(Consumer):  # type: ignore[misc]
    """Celery's consumer, dead-lettering the messages it cannot serve instead of dropping them."""

    class Blueprint(Consumer.Blueprint):  # type: ignore[misc]
        """Celery's consumer steps but native delayed delivery: graphrunner sends no ETA or
        countdown message (its timers are in Redis), so the 28 exchanges and quorum queues
        Celery declares for them next to quorum queues would serve nothing."""

        default_steps = [s for s in Consumer.Blueprint.default_steps if not s.endswith(":DelayedDelivery")]

    def on_unknown_message(self, body: Any, message: Any) -> None:
        """A message that is not a task message."""
        self._refuse(message, "not a Celery task message (no task header)", "not_a_task")

    def on_unknown_task(self, body: Any, message: Any, exc: Exception) -> None:
        """A task no worker of this cluster serves."""
        task = message.headers.get("task") if isinstance(message.headers, dict) else None
        known = ", ".join(t for t in (STEP_TASK, ITEM_TASK))
        reason = f"unknown task {task!r:.100} (graphrunner's workers serve {known})"
        self._refuse(message, reason, "unknown_task")

    def on_invalid_task(self, body: Any, message: Any, exc: Exception) -> None:
        """A task message Celery found invalid (or of a content type it does not accept)."""
        self._refuse(message, f"invalid task message: {exc}", "invalid_task")

    def on_decode_error(self, message: Any, exc: Exception) -> None:
        """A message whose body cannot be decoded."""
        self._refuse(message, f"cannot decode the body: {exc}", "undecodable")

    def on_connection_error_after_connected(self, exc: Exception) -> None:
        """The connection or channel failed: name RabbitMQ's consumer timeout when it was that."""
        if consumer_timed_out(exc):
            log.error(CONSUMER_TIMED_OUT, exc)
        super().on_connection_error_after_connected(exc)

    def _refuse(self, message: Any, reason: str, cause: str) -> None:
        headers = message.headers if isinstance(message.headers, dict) else {}
        task, queue = headers.get("task"), _queue(message)
        refuse(reason, task=task, queue=queue, body=message.body, headers=headers, cause=cause)
        try:
            message.ack()
        except Exception as exc:  # already acknowledged, or the connection is gone
            log.warning("could not acknowledge a refused message: %s", exc)


def consumer_timed_out(exc: BaseException) -> bool:
    """RabbitMQ closed the channel because a delivery went unacknowledged past consumer_timeout
    (406 PRECONDITION_FAILED, "delivery acknowledgement on channel N timed out")."""
    text = str(exc)
    return getattr(exc, "reply_code", None) == 406 and "timed out" in text and "ack" in text
