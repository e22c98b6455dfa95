"""What every worker does besides running tasks, so that runs survive dead workers.

- **Vouching** (Redis broker): kombu restores a message to its queue when its time in the
  `unacked_index` is older than the visibility timeout. Every `visibility_timeout / 4`
  seconds a live worker marks the messages it holds (reserved, running) as delivered now,
  so they are never restored while it lives, however long a step takes; the messages of a
  worker that died are restored `GRAPHRUNNER_VISIBILITY_TIMEOUT` seconds after it last
  vouched for them, and run on another worker.
- **Timers**: durable sleeps, retry backoffs and polls are timers in the store, not ETA
  messages a worker holds; every `TIMER_TICK` seconds a worker moves the due ones onto
  their queues (one script call, atomic on a Redis broker; on RabbitMQ through their runs'
  outboxes, so a broker that is away keeps them in the store, see `Publisher.pump`).
- **Sweeps**: every `GRAPHRUNNER_SWEEP_INTERVAL` seconds a worker runs a sweeper pass (a
  lock keeps one pass at a time across the cluster).
- **Schedules**: every `SCHEDULE_TICK` seconds a worker fires the schedules' due ticks
  (graphrunner/cluster/schedules/firing.py; one ZRANGEBYSCORE when nothing is due), after registering
  the schedules the graphs on GRAPHRUNNER_GRAPH_PATH declare, once.

Vouching runs in the consumer's event loop (a Celery bootstep, `Vouch`); timers and sweeps in
one daemon thread per worker (`Housekeeper`), also run alone by `graphrunner beat`.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from celery import bootsteps
from celery.worker import state as worker_state

from graphrunner.cluster.transport import guard
from graphrunner.cluster.worker import sweeper
from graphrunner.cluster.worker.liveness import HOUSEKEEPING
from graphrunner.errors import ScheduleError
from graphrunner.telemetry import metrics

if TYPE_CHECKING:
    from graphrunner.cluster.runs.context import Cluster
    from graphrunner.cluster.schedules.admin import Schedules

log = logging.getLogger("graphrunner.worker")
TIMER_TICK = 0.5  # seconds between two looks for due timers
PUMP_BATCH = 100  # due timers taken at once
SCHEDULE_TICK = 1.0  # seconds between two looks for due schedule ticks


class Housekeeper:
    """Moves due timers onto their queues and runs sweeper passes, in a daemon thread."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_sweep = time.monotonic() + cluster.settings.sweep_interval
        self._schedules: Schedules[str] | None = None
        self._no_schedules = False  # a store schedules cannot use (the unit tests' MemoryStore)
        self._next_schedules = 0.0

    def start(self) -> Housekeeper:
        """Start the thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self.run, name="graphrunner-housekeeping", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread and wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def run(self) -> None:
        """Tick until stopped."""
        while not self._stop.wait(TIMER_TICK):
            self.tick()

    def tick(self) -> None:
        """One round: move due timers; sweep when a pass is due. Never raises."""
        try:
            taken = PUMP_BATCH
            while taken >= PUMP_BATCH:  # a backlog of due timers: keep moving them
                taken = self.cluster.publisher.pump(time.time(), PUMP_BATCH)
                metrics.timers_due(taken)
        except Exception as exc:
            log.warning("moving due timers failed (%s); will try again", exc)
        if time.monotonic() >= self._next_sweep:
            self._next_sweep = time.monotonic() + self.cluster.settings.sweep_interval
            try:
                sweeper.sweep(self.cluster)
            except Exception as exc:
                log.warning("sweeper pass failed (%s); will try again", exc)
        self.fire_schedules()
        HOUSEKEEPING.mark()  # the liveness file's proof that this thread is not stuck

    def fire_schedules(self) -> None:
        """Fire the schedules' due ticks (registering the declared schedules first). Never raises."""
        if self._no_schedules or time.monotonic() < self._next_schedules:
            return
        self._next_schedules = time.monotonic() + SCHEDULE_TICK
        try:
            if self._schedules is None:
                try:
                    self._schedules = _schedules(self.cluster)
                except ScheduleError as exc:
                    self._no_schedules = True
                    log.info("schedules are not fired here: %s", exc)
                    return
            self._schedules.scheduler.fire_due()
        except Exception as exc:
            log.warning("firing schedules failed (%s); will try again", exc)


def _schedules(cluster: Cluster) -> Schedules[str]:
    """The cluster's schedules, the graph path's declared ones registered."""
    from graphrunner.cluster.schedules.admin import Schedules
    from graphrunner.cluster.schedules.declared import register_declared

    schedules = Schedules(cluster, handle=str)
    register_declared(schedules)
    return schedules


class Vouch(bootsteps.StartStopStep):  # type: ignore[misc]
    """A consumer bootstep: vouch for the messages this worker holds, and run its `Housekeeper`."""

    requires = ("celery.worker.consumer.tasks:Tasks",)
    cluster: Cluster  # set on the subclass a worker registers (`WorkerRuntime`)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.tref: Any = None
        self.keeper: Housekeeper | None = None

    def start(self, consumer: Any) -> None:
        """Start vouching (Redis brokers) and housekeeping; refused messages go to this store."""
        guard.SINK[:] = [self.cluster.store]
        broker = self.cluster.publisher.broker
        if broker is not None and _qos(consumer) is not None:
            every = max(1.0, self.cluster.settings.visibility_timeout / 4)
            self.tref = consumer.timer.call_repeatedly(every, self.vouch, (consumer,), priority=10)
        self.keeper = Housekeeper(self.cluster).start()

    def vouch(self, consumer: Any) -> None:
        """Mark every message this worker's tasks hold (reserved or running) as delivered now.

        Celery's own bookkeeping says which: a message whose task has ended is never vouched
        for, even if acknowledging or requeueing it failed (Redis away), so it comes back.
        Never raises.
        """
        broker = self.cluster.publisher.broker
        if broker is None:
            return
        try:
            tags = held_tags()
            broker.refresh(tags)
        except Exception as exc:
            log.warning("could not vouch for the held message(s) (%s)", exc)

    def stop(self, consumer: Any) -> None:
        """Stop vouching and housekeeping."""
        if self.tref is not None:
            self.tref.cancel()
            self.tref = None
        if self.keeper is not None:
            self.keeper.stop()
            self.keeper = None

    shutdown = stop


def held_tags() -> list[str]:
    """The delivery tags of the messages whose tasks this process has reserved or is running."""
    for _ in range(5):
        try:
            requests = [*worker_state.reserved_requests, *worker_state.active_requests]
            break
        except RuntimeError:  # a pool thread changed the sets while they were read: read again
            continue
    else:
        return []
    tags = (getattr(getattr(r, "message", None), "delivery_tag", None) for r in requests)
    return sorted({t for t in tags if isinstance(t, str)})


def _qos(consumer: Any) -> Any:
    """The Redis QoS of the consumer's task channel (None for other transports)."""
    channel = getattr(getattr(consumer, "task_consumer", None), "channel", None)
    qos = getattr(channel, "qos", None)
    return qos if hasattr(qos, "unacked_index_key") and hasattr(qos, "_delivered") else None
