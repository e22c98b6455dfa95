"""`WorkerRuntime`: what a worker process runs: the step executor, the item runner, their
services, and the Celery app with graphrunner's tasks, message guard and housekeeping."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from celery import Celery

from graphrunner.cluster.runs.context import Cluster
from graphrunner.cluster.steps.executor import ExecutorOptions, StepExecutor
from graphrunner.cluster.steps.item_runner import ItemRunner
from graphrunner.cluster.transport.app import create_app
from graphrunner.cluster.transport.publisher import is_redis_url
from graphrunner.cluster.worker import observed
from graphrunner.cluster.worker.config import deployment_hooks as configured_hooks
from graphrunner.cluster.worker.heartbeat import Heartbeats
from graphrunner.cluster.worker.housekeeping import Vouch
from graphrunner.cluster.worker.liveness import Liveness
from graphrunner.cluster.worker.loops import ThreadLoops
from graphrunner.cluster.worker.tasks import register_tasks
from graphrunner.compiled import CompiledHook
from graphrunner.services import StepServices
from graphrunner.settings import Settings
from graphrunner.store import Store

GUARDED_TRANSPORT = "graphrunner.cluster.transport.guard:RedisTransport"
GUARDED_CONSUMER = "graphrunner.cluster.transport.guard:GuardedConsumer"


def options_of(settings: Settings) -> ExecutorOptions:
    """The executor's pacing from the settings."""
    return ExecutorOptions(
        chunk=max(1, settings.fanout_chunk),
        loop_slice=max(1.0, min(10.0, settings.visibility_timeout / 3)),
        max_redeliveries=settings.max_redeliveries,
    )


def worker_app(settings: Settings) -> Celery:
    """The Celery app of a worker: graphrunner's, with the guarded consumer (and transport)."""
    app = create_app(settings)
    app.conf.worker_consumer = GUARDED_CONSUMER
    if is_redis_url(settings.broker):
        app.conf.broker_transport = GUARDED_TRANSPORT
    return app


class WorkerRuntime:
    """A worker's executor, item runner and Celery app, all from `settings` (see the module doc).

    `deployment_hooks` default to those of GRAPHRUNNER_HOOKS and GRAPHRUNNER_WORKER_CONFIG, whose
    module is imported first (a bad file or module raises `ConfigurationError`); `store`
    replaces the configured Redis (the tests pass a `MemoryStore`); `liveness`, a file the
    worker keeps touching while it is not wedged (`graphrunner worker` passes
    GRAPHRUNNER_LIVENESS_FILE; in-thread workers keep none).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        store: Store | None = None,
        deployment_hooks: Sequence[CompiledHook] | None = None,
        retry_seconds: float = 60.0,
        liveness: Path | None = None,
    ) -> None:
        self.settings = settings
        self.app = worker_app(settings)
        if store is None:
            self.cluster = Cluster.connect(settings, retry_seconds=retry_seconds, app=self.app)
        else:
            self.cluster = Cluster.over(settings, store, app=self.app)
        if deployment_hooks is None:
            deployment_hooks = configured_hooks(settings)
        self.services = StepServices.from_settings(
            settings, cache=self.cluster.store, deployment_hooks=deployment_hooks
        )
        stall_after = float(settings.stall_after)
        self.heartbeats = Heartbeats(self.cluster.store, min(30.0, stall_after / 4), stall_after)
        self.loops = ThreadLoops()
        options = options_of(settings)
        self.executor = StepExecutor(
            self.cluster, self.services, heartbeats=self.heartbeats, options=options, loops=self.loops
        )
        self.items = ItemRunner(
            self.cluster,
            self.services,
            heartbeats=self.heartbeats,
            loops=self.loops,
            max_redeliveries=options.max_redeliveries,
        )
        register_tasks(self.app, self.executor, self.items)
        observed.connect()  # OpenTelemetry set up per worker process, when OTEL_* asks for it
        self.app.steps["consumer"].add(type("GraphrunnerVouch", (Vouch,), {"cluster": self.cluster}))
        if liveness is not None:
            self.app.steps["consumer"].add(type("GraphrunnerLiveness", (Liveness,), {"path": liveness}))

    def close(self) -> None:
        """Stop heartbeats, close event loops and connections (the worker has stopped)."""
        self.heartbeats.stop()
        self.loops.close()
        self.cluster.close()
