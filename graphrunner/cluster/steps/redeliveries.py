"""Messages that come back: requeued on Redis or broker trouble, counted, poison past the cap.

A task that meets Redis or broker trouble (`infrastructure`: never its run's fault) puts its
message back on its queue, and a worker that dies leaves its message unacknowledged for the
broker to hand out again. Either way the message comes back marked redelivered. One that
keeps coming back (its task keeps losing its worker: killed, out of memory?) must not loop
forever (Celery's `reject_on_worker_lost`), so each redelivery of a step (at its phase) or of
a foreach item is counted in its run's record; past GRAPHRUNNER_MAX_REDELIVERIES it is
poison: the step fails its run, the item is recorded failed, and neither runs again.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass

import redis

from graphrunner.cluster.transport.messages import ItemMessage
from graphrunner.engine import RunSnapshot
from graphrunner.errors import BrokerUnavailable, StoreUnavailable
from graphrunner.store import Store
from graphrunner.telemetry import metrics

log = logging.getLogger("graphrunner.worker")
# requeue the message: never a run's fault. A broker away (RabbitMQ restarting) when a committed
# step publishes what follows (then the run's outbox keeps it), or when a suspended step sends its
# foreach chunk or child run (then the sweeper sends them), must not fail the run.
INFRASTRUCTURE = (StoreUnavailable, redis.RedisError, BrokerUnavailable)


def infrastructure(exc: Exception) -> bool:
    """Redis or the broker is in trouble (not the run): `INFRASTRUCTURE`, or the error kombu raises
    when a publish (a Celery chord's) has spent its retries: its module is loaded by then."""
    if isinstance(exc, INFRASTRUCTURE):
        return True
    kombu = sys.modules.get("kombu.exceptions")
    return kombu is not None and isinstance(exc, kombu.OperationalError)


@dataclass(frozen=True)
class Redelivery:
    """One counted redelivery of a message: how many so far, and the cap."""

    count: int
    limit: int

    @property
    def poison(self) -> bool:
        """Past the cap: the message is not run again."""
        return self.count > self.limit


def of_step(store: Store, snap: RunSnapshot, limit: int) -> Redelivery:
    """Count a redelivery of the step message at `snap` (its step and phase)."""
    metrics.redelivered("step")
    return count(store, snap.run_id, f"{snap.step + 1}.{snap.phase}", limit, what=f"step {snap.step + 1}")


def of_item(store: Store, msg: ItemMessage, limit: int) -> Redelivery:
    """Count a redelivery of the foreach item message `msg`."""
    metrics.redelivered("item")
    what = f"item {msg.index} of step {msg.step}"
    return count(store, msg.run_id, f"item:{msg.tag}:{msg.index}", limit, what=what)


def count(store: Store, run_id: str, key: str, limit: int, *, what: str) -> Redelivery:
    """Count a redelivery of `key` of run `run_id`; under the cap, log it (`what` names it)."""
    counted = Redelivery(store.count_redelivery(run_id, key), limit)
    if not counted.poison:
        log.warning("%s of run %s redelivered (%s so far)", what, run_id, counted.count)
    return counted
