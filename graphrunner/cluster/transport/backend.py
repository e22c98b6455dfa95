"""Celery's Redis result backend, minus waiting: graphrunner never waits on a task result.

Runs are followed through their transcript streams, not Celery results; the backend only
stores the (empty) results of foreach item tasks that Celery's chord counts. Stock Celery
subscribes the sending process to a result channel for every task it sends outside a
worker, and keeps that subscription until the result is read: in a producer application
that is a subscription per submitted run, never released. This backend does not subscribe.
"""

from __future__ import annotations

from typing import Any

from celery.backends.redis import RedisBackend


class ResultBackend(RedisBackend):  # type: ignore[misc]
    """The Redis result backend without per-task result subscriptions."""

    def on_task_call(self, producer: Any, task_id: str) -> None:
        """Do not subscribe to the task's result: nothing here will wait for it."""

    def on_result_fulfilled(self, result: Any) -> None:
        """Nothing to unsubscribe from (stock Celery does it when a result object is collected,
        reconnecting to Redis for it, for 20 s when Redis has already gone)."""


def backend_url(redis_url: str) -> str:
    """The `result_backend` setting that selects `ResultBackend` for `redis_url`."""
    return f"{__name__}:ResultBackend+{redis_url}"
