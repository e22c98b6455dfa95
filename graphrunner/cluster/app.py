"""The Celery app: JSON only, late acknowledgement, the step task and how steps are enqueued."""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery

from graphrunner.cluster.executor import StepExecutor
from graphrunner.cluster.messages import TASK_NAME, BadMessage, StepMessage
from graphrunner.engine import RunSnapshot
from graphrunner.errors import ConfigurationError
from graphrunner.graph import Graph
from graphrunner.settings import Settings
from graphrunner.store import RedisStore

log = logging.getLogger("graphrunner.worker")
PUBLISH_RETRY = {"max_retries": 10, "interval_start": 0.1, "interval_step": 0.5, "interval_max": 3}


class Runtime:
    """A Celery app with graphrunner's step task, its store and its executor."""

    def __init__(self, settings: Settings, *, store_retry_seconds: float = 60.0) -> None:
        if not settings.redis_url:
            raise ConfigurationError("GRAPHRUNNER_REDIS_URL is not set")
        self.settings = settings
        self.store = RedisStore.from_url(settings.redis_url, retry_seconds=store_retry_seconds)
        self.app = create_app(settings)
        self.executor = StepExecutor(self.store, self.enqueue)
        _register_step_task(self)

    def enqueue(self, snap: RunSnapshot, graph: Graph | None = None) -> None:
        """Send the message for the step after `snap`, named and routed after its node."""
        graph = graph or self.executor.graphs.get(snap.graph_hash)
        node = snap.node or ""
        spec = graph.spec.nodes.get(node)
        queue = getattr(spec, "queue", None) or self.settings.queue
        self.app.send_task(
            TASK_NAME,
            args=[snap.run_id, snap.step],
            queue=queue,
            shadow=f"{snap.graph_id}:{node}",
            retry=True,
            retry_policy=PUBLISH_RETRY,
        )


def create_app(settings: Settings) -> Celery:
    """A Celery app configured for graphrunner (JSON only, acks late, reject on worker lost)."""
    app = Celery("graphrunner", broker=settings.broker, backend=settings.redis_url, set_as_current=False)
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        # the step task never raises for run errors (they are committed as failed runs):
        # an exception is infrastructure trouble (Redis gone past the retry budget), so the
        # message stays unacknowledged and is redelivered after the visibility timeout
        task_acks_on_failure_or_timeout=False,
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
    """Redis transport options: redelivery after `visibility_timeout`, swept for promptly.

    kombu looks for abandoned messages every interval x throttle seconds (100 s by default);
    graphrunner sweeps every third of the visibility timeout (1-10 s), so a message of a
    killed worker is redelivered soon after the timeout. Sockets time out so a broker that
    disappears is noticed and reconnected to.
    """
    return {
        "visibility_timeout": settings.visibility_timeout,
        "unacked_restore_interval": max(1, min(10, settings.visibility_timeout // 3)),
        "unacked_restore_throttle": 1,
        "socket_timeout": 30,
        "socket_connect_timeout": 5,
        "health_check_interval": 30,
    }


def _register_step_task(runtime: Runtime) -> None:
    def step(self: Any, *args: Any, **kwargs: Any) -> str:
        """Take one step of a run (thin: parse the message, let the executor do the rest)."""
        try:
            msg = StepMessage.parse(args, kwargs)
        except BadMessage as exc:
            log.error("%s", exc)
            return "bad_message"
        return runtime.executor.execute(msg).outcome

    # shared=False: a second Runtime in one process must not get this runtime's task
    options = {
        "name": TASK_NAME,
        "bind": True,
        "acks_late": True,
        "reject_on_worker_lost": True,
        "shared": False,
    }
    runtime.app.task(**options, ignore_result=True)(step)
