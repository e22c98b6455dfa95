"""The Celery app both sides of the cluster share: JSON only, late acknowledgement, graphrunner's
queue, and the Redis transport options that make a dead worker's messages come back quickly (on
RabbitMQ: publisher confirms, the queue type, and reconnecting when the broker closes a channel)."""

from __future__ import annotations

from typing import Any

from celery import Celery

from graphrunner.cluster.transport.backend import backend_url
from graphrunner.errors import ConfigurationError
from graphrunner.settings import Settings

RESTORE_EVERY = 2  # seconds between two looks (by every worker) for messages of a dead worker
RESTORE_MUTEX = 10  # seconds a restore's mutex outlives a worker killed while holding it
BROKER_SOCKET_TIMEOUT = 10  # seconds a Redis broker command may wait for its reply (BRPOP's comes in 1 s)
HEALTH_CHECK = 5  # seconds: how often a silent broker connection is looked at (see `broker_options`)
# RabbitMQ: a publish returns once the broker has taken the message (persistent, on a durable
# queue), so a message the broker lost when it went away raises instead of leaving the outbox
AMQP_OPTIONS: dict[str, Any] = {"confirm_publish": True}


def create_app(settings: Settings) -> Celery:
    """A Celery app configured for graphrunner (JSON only, acks late, reject on worker lost)."""
    check_queue_type(settings)
    app = Celery(
        "graphrunner",
        broker=settings.broker,
        backend=backend_url(settings.result_backend()),
        set_as_current=False,
    )
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        # a task never fails: run errors are committed, infrastructure trouble is an explicit
        # requeue (`Reject(requeue=True)`) and anything else fails the run it belongs to
        task_acks_on_failure_or_timeout=True,
        task_ignore_result=True,
        task_default_queue=settings.queue,
        # RabbitMQ: graphrunner's queue, and those named by `-Q` or a node's `queue`, are of one
        # type (a queue declared again with another type is refused: PRECONDITION_FAILED)
        task_default_queue_type=settings.queue_type,
        task_create_missing_queue_type=settings.queue_type,
        worker_prefetch_multiplier=settings.prefetch,
        broker_transport_options=broker_options(settings),
        result_backend_transport_options={"visibility_timeout": settings.visibility_timeout},
        broker_connection_retry_on_startup=True,
        # RabbitMQ closes a channel (PRECONDITION_FAILED) whose delivery outlived its
        # consumer_timeout: reconnect instead of exiting (celery/celery#6760), and let the steps
        # in flight finish and commit (their messages come back, and are dropped as duplicates)
        broker_channel_error_retry=settings.amqp,
        worker_cancel_long_running_tasks_on_connection_loss=False,
        worker_hijack_root_logger=False,
        worker_send_task_events=settings.task_events,
        task_send_sent_event=settings.task_events,
    )
    return app


def check_queue_type(settings: Settings) -> None:
    """Refuse quorum queues on a broker that is not RabbitMQ (`ConfigurationError`)."""
    if settings.queue_type == "quorum" and not settings.amqp:
        scheme = (settings.broker or "").split("://", 1)[0]
        raise ConfigurationError(
            f"GRAPHRUNNER_QUEUE_TYPE is quorum but the broker is {scheme}://: quorum queues are "
            "RabbitMQ's; unset GRAPHRUNNER_QUEUE_TYPE (classic queues) or use RabbitMQ "
            "(GRAPHRUNNER_BROKER_URL=amqp://...)"
        )


def broker_options(settings: Settings) -> dict[str, Any]:
    """Transport options. RabbitMQ: `AMQP_OPTIONS` (publisher confirms).

    Redis: a dead worker's messages are restored `visibility_timeout` after it last vouched for
    them, looked for every `RESTORE_EVERY` seconds. One worker at a time restores, under a
    mutex in Redis that kombu keeps for 5 minutes unless released: a worker SIGKILLed while it
    held it stopped every restore (and every run whose message the dead worker held) for 5
    minutes; `RESTORE_MUTEX` seconds bound that (a restore takes milliseconds).

    A live worker keeps vouching for the messages it holds (`housekeeping.Vouch`), however long
    it holds them, so a long step is never delivered twice.

    A broker can go silent without closing the connection (a partition, a NAT or firewall that
    forgot it, a failed-over host): every call is bounded. Connecting times out; every command
    the consumer waits for (acknowledge, requeue, restore, publish) times out after
    `BROKER_SOCKET_TIMEOUT` seconds (without it a blackholed connection held the worker's main
    process for ever: tests/integration/test_faults.py); and the consumer's BRPOP, which the
    event loop waits for without a socket timeout, is dropped and reconnected when its reply
    (due within kombu's 1 s `brpop_timeout`) is `HEALTH_CHECK` seconds late, looked at every
    `HEALTH_CHECK` seconds (kombu 5.7: `maybe_check_brpop_health`).
    """
    if settings.amqp:
        return dict(AMQP_OPTIONS)
    return {
        "visibility_timeout": settings.visibility_timeout,
        "unacked_restore_interval": RESTORE_EVERY,
        "unacked_restore_throttle": 1,
        "unacked_mutex_expire": RESTORE_MUTEX,
        "socket_connect_timeout": 5,
        "socket_timeout": BROKER_SOCKET_TIMEOUT,
        "health_check_interval": HEALTH_CHECK,
    }
