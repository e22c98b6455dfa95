"""The Celery app: JSON only, late acknowledgement, the step and item tasks, and how they are sent."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from celery import Celery, Signature, chord

from graphrunner.cluster import lifecycle, sweeper
from graphrunner.cluster.backend import backend_url
from graphrunner.cluster.executor import StepExecutor
from graphrunner.cluster.heartbeat import Heartbeats
from graphrunner.cluster.items import ItemRunner, later
from graphrunner.cluster.messages import (
    ITEM_TASK_NAME,
    SWEEP_TASK_NAME,
    TASK_NAME,
    BadMessage,
    ItemMessage,
    StepMessage,
)
from graphrunner.cluster.preflight import VisibilityCheck, check_at_startup
from graphrunner.engine import RunSnapshot
from graphrunner.errors import ConfigurationError
from graphrunner.graph import Graph
from graphrunner.loading.hooks_file import load_hooks_file
from graphrunner.runner import LocalRunner
from graphrunner.settings import Settings
from graphrunner.store import RedisStore

log = logging.getLogger("graphrunner.worker")
PUBLISH_RETRY = {"max_retries": 10, "interval_start": 0.1, "interval_step": 0.5, "interval_max": 3}


class Runtime:
    """A Celery app with graphrunner's tasks, its store and its executor; the executor's `Sender`."""

    def __init__(self, settings: Settings, *, store_retry_seconds: float = 60.0) -> None:
        if not settings.redis_url:
            raise ConfigurationError("GRAPHRUNNER_REDIS_URL is not set")
        self.settings = settings
        self.store = RedisStore.from_url(
            settings.redis_url, retry_seconds=store_retry_seconds, retention_seconds=settings.retention
        )
        self.app = create_app(settings)
        runner = LocalRunner(
            cache=self.store,
            cache_ttl=settings.cache_ttl,
            max_state_bytes=settings.max_state_bytes,
            default_capabilities=settings.default_capabilities,
        )
        self.executor = StepExecutor(self.store, self, runner, chunk=settings.fanout_chunk)
        self.executor.loop_slice = max(1.0, min(10.0, settings.visibility_timeout / 3))
        self.executor.max_redeliveries = settings.max_redeliveries
        self.executor.heartbeats = Heartbeats(self.store, interval=min(30.0, settings.stall_after / 4))
        self.items = ItemRunner(self.store, runner, max_redeliveries=settings.max_redeliveries)
        _register_tasks(self)

    def serve(self) -> Runtime:
        """Prepare to take steps as a worker: load the deployment hooks (GRAPHRUNNER_HOOKS), and
        check each graph's node timeouts and retry waits against the visibility timeout."""
        if self.settings.hooks_file is not None:
            self.executor.runner.deployment_hooks = load_hooks_file(self.settings.hooks_file)
        self.executor.visibility = VisibilityCheck(self.settings.visibility_timeout)
        return self

    def preflight(self) -> list[str]:
        """Warn (logged) when the visibility timeout is not longer than what the graphs on the
        graph path may hold a message for; returns the warnings."""
        return check_at_startup(self.settings)

    def _queue(self, snap: RunSnapshot, graph: Graph | None) -> str:
        graph = graph or self.executor.graphs.get(snap.graph_hash)
        spec = graph.spec.nodes.get(snap.node or "")
        return getattr(spec, "queue", None) or self.settings.queue

    def _step(self, snap: RunSnapshot, graph: Graph | None) -> Signature:
        return self.app.signature(
            TASK_NAME,
            args=[snap.run_id, snap.step, snap.phase] if snap.phase else [snap.run_id, snap.step],
            queue=self._queue(snap, graph),
            shadow=f"{snap.graph_id}:{snap.node or ''}",
            retry=True,
            retry_policy=PUBLISH_RETRY,
            immutable=True,
        )

    def enqueue(self, snap: RunSnapshot, graph: Graph | None = None, countdown: float | None = None) -> None:
        """Send the message for the step after `snap`, named and routed after its node."""
        self._step(snap, graph).apply_async(countdown=countdown)

    def finished(self, snap: RunSnapshot) -> None:
        """A run has finished: wake its parent's step, hand its concurrency key on."""
        if snap.parent:
            self.notify(snap.parent["run_id"], snap.parent["step"], snap.parent["phase"])
        if snap.concurrency_key:
            lifecycle.hand_on(self, snap)

    def notify(self, run_id: str, step: int, phase: int) -> None:
        """Wake a parent's step whose child run has finished."""
        self.app.send_task(
            TASK_NAME,
            args=[run_id, step, phase],
            queue=self.settings.queue,
            shadow=f"{run_id}:child-finished",
            retry=True,
            retry_policy=PUBLISH_RETRY,
        )

    def fan_out(self, snap: RunSnapshot, graph: Graph, items: Sequence[dict[str, Any]]) -> None:
        """Send foreach items as a chord whose body is the step after `snap` (its join)."""
        join = self._step(snap, graph)
        queue = self._queue(snap, graph)
        sigs = [
            self.app.signature(
                ITEM_TASK_NAME,
                args=[payload],
                queue=queue,
                shadow=f"{snap.graph_id}:{snap.node}[{payload['index']}]",
                retry=True,
                retry_policy=PUBLISH_RETRY,
            )
            for payload in items
        ]
        if len(sigs) >= 2:
            chord(sigs, join, app=self.app).apply_async()
        elif sigs:
            sigs[0].apply_async(link=join)
        else:
            join.apply_async()


def create_app(settings: Settings) -> Celery:
    """A Celery app configured for graphrunner (JSON only, acks late, reject on worker lost)."""
    assert settings.redis_url is not None
    backend = backend_url(settings.redis_url)
    app = Celery("graphrunner", broker=settings.broker, backend=backend, set_as_current=False)
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
        # the sweeper runs wherever beat runs (`graphrunner worker -B`, or `celery beat`);
        # the schedule lives in memory: nothing is written to the working directory
        beat_scheduler="celery.beat:Scheduler",
        beat_schedule={
            "graphrunner-sweep": {
                "task": SWEEP_TASK_NAME,
                "schedule": float(max(1, settings.sweep_interval)),
                "options": {"queue": settings.queue, "expires": float(max(1, settings.sweep_interval))},
            }
        },
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


def _register_tasks(runtime: Runtime) -> None:
    def step(self: Any, *args: Any, **kwargs: Any) -> str:
        """Take one step of a run (thin: parse the message, let the executor do the rest)."""
        try:
            msg = StepMessage.parse(args, kwargs)
        except BadMessage as exc:
            log.error("%s", exc)
            return "bad_message"
        return runtime.executor.execute(msg, redelivered=_redelivered(self)).outcome

    def item(self: Any, *args: Any, **kwargs: Any) -> None:
        """Run one foreach item and record its result; never raises (it is a chord part)."""
        try:
            msg = ItemMessage.parse(args, kwargs)
        except BadMessage as exc:
            log.error("%s", exc)
            return None
        try:
            with runtime.executor.heartbeats.beating(msg.run_id):
                deferred = runtime.executor.run_async(runtime.items.run(msg, redelivered=_redelivered(self)))
        except Exception as exc:  # Redis gone past its retry budget: try the item again later
            log.warning("item %s of run %s could not be recorded (%s); retrying", msg.index, msg.run_id, exc)
            raise self.retry(args=[msg.model_dump()], countdown=5) from None
        if deferred is not None:
            raise self.retry(args=[later(msg, deferred)], countdown=deferred.delay)
        return None

    def sweep(self: Any) -> dict[str, Any]:
        """One sweeper pass (from the beat schedule): repair stalled runs."""
        report = sweeper.sweep(runtime)
        if report.repaired:
            log.warning("sweeper repaired %d stalled run(s)", len(report.repaired))
        return report.to_dict()

    # shared=False: a second Runtime in one process must not get this runtime's tasks
    options = {
        "bind": True,
        "acks_late": True,
        "reject_on_worker_lost": True,
        "shared": False,
    }
    runtime.app.task(name=TASK_NAME, **options, ignore_result=True)(step)
    # chord parts store no result key of their own: the Redis backend counts a part in its
    # chord-part script whether or not the result is stored, and the join reads the item
    # records graphrunner keeps (storing one costs a GET and a SET per item)
    runtime.app.task(name=ITEM_TASK_NAME, **options, ignore_result=True, max_retries=None)(item)
    runtime.app.task(name=SWEEP_TASK_NAME, bind=True, shared=False, ignore_result=True)(sweep)


def _redelivered(task: Any) -> bool:
    """The broker delivered this message before without an acknowledgement (kombu sets the flag
    when it restores a message of a lost worker or requeues a rejected one)."""
    return bool((task.request.delivery_info or {}).get("redelivered"))
