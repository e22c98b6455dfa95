"""The bare Celery baseline: a task that reads a small JSON state, writes it back, enqueues its successor."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import redis
from celery import Celery

TASK_NAME = "bench.step"
QUEUE = "bench"
PUBLISH_RETRY = {"max_retries": 10, "interval_start": 0.1, "interval_step": 0.5, "interval_max": 3}
_clients: dict[int, redis.Redis] = {}


def state_key(chain: str) -> str:
    """The Redis key holding one chain's JSON state."""
    return f"bench:chain:{chain}"


def _redis(url: str) -> redis.Redis:
    """One Redis client per process (prefork children each open their own)."""
    client = _clients.get(os.getpid())
    if client is None:
        client = redis.Redis.from_url(url, decode_responses=True, socket_connect_timeout=2, socket_timeout=15)
        _clients[os.getpid()] = client
    return client


def forget_clients() -> None:
    """Drop this process's Redis clients (profiling creates several apps in one process)."""
    _clients.clear()


def create_app(redis_url: str, *, prefetch: int = 1, events: bool = False) -> Celery:
    """A Celery app configured as graphrunner's (JSON, acks late, results ignored), with the step task."""
    app = Celery("bench", broker=redis_url, backend=redis_url, set_as_current=False)
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_ignore_result=True,
        task_default_queue=QUEUE,
        worker_prefetch_multiplier=prefetch,
        broker_transport_options={"visibility_timeout": 3600},
        result_backend_transport_options={"visibility_timeout": 3600},
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        worker_send_task_events=events,
        task_send_sent_event=events,
    )

    @app.task(name=TASK_NAME, acks_late=True, ignore_result=True, shared=False)  # type: ignore[untyped-decorator]
    def step(key: str, total: int) -> None:
        """GET the state, count one step, SET it back, enqueue the next step until `total`."""
        client = _redis(redis_url)
        state: dict[str, Any] = json.loads(client.get(key) or "{}")
        state["n"] = int(state.get("n", 0)) + 1
        state["t"] = time.time()
        client.set(key, json.dumps(state))
        if state["n"] < total:
            app.send_task(TASK_NAME, args=[key, total], queue=QUEUE, retry=True, retry_policy=PUBLISH_RETRY)

    return app
