"""The Celery app both sides of the cluster share: JSON only, late acknowledgement, graphrunner's
queue, and the Redis transport options that make a dead worker's messages come back quickly."""

from __future__ import annotations

from typing import Any

from celery import Celery

from graphrunner.cluster.backend import backend_url
from graphrunner.settings import Settings

RESTORE_EVERY = 2  # seconds between two looks (by every worker) for messages of a dead worker


def create_app(settings: Settings) -> Celery:
    """A Celery app configured for graphrunner (JSON only, acks late, reject on worker lost)."""
    assert settings.redis_url is not None
    app = Celery(
        "graphrunner", broker=settings.broker, backend=backend_url(settings.redis_url), set_as_current=False
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
        worker_prefetch_multiplier=settings.prefetch,
        broker_transport_options=broker_options(settings),
        result_backend_transport_options={"visibility_timeout": settings.visibility_timeout},
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        worker_send_task_events=settings.task_events,
        task_send_sent_event=settings.task_events,
    )
    return app


def broker_options(settings: Settings) -> dict[str, Any]:
    """Redis transport options: a dead worker's messages are restored `visibility_timeout` after
    it last vouched for them, looked for every `RESTORE_EVERY` seconds.

    A live worker keeps vouching for the messages it holds (`housekeeping.Vouch`), however long
    it holds them, so a long step is never delivered twice. Connecting times out, and a health
    check every 30 s notices a broker that went away silently; reads carry no socket timeout, as
    in a plain Celery app, because a socket with a timeout polls before every read.
    """
    return {
        "visibility_timeout": settings.visibility_timeout,
        "unacked_restore_interval": RESTORE_EVERY,
        "unacked_restore_throttle": 1,
        "socket_connect_timeout": 5,
        "health_check_interval": 30,
    }
