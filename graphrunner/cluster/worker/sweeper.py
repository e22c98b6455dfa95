"""The sweeper: finds running runs whose work was lost and sends it again.

Every commit gives a running run a progress deadline (`GRAPHRUNNER_STALL_AFTER` after the
commit, or after the timer it waits for); heartbeats of steps and items in flight push it
on. A pass looks only at runs past their deadline, and repairs precisely what is missing:

- a step message that is neither held by a worker nor waiting on its queue (lost between a
  worker popping it and recording it, or with a broker that restarted without it) is sent
  again; a message still in flight is left alone, so a backlog is never duplicated;
- a message committed to a run's outbox but not published (its worker died in between,
  broker other than the store's Redis) is published;
- a foreach whose chunk was never sent, or whose items were lost, gets its missing items;
- a parent whose child (or one of its kids) has finished but was never woken is woken, and
  kids committed but never created (their worker died) are created;
- a concurrency key held by a finished run is handed on.

Re-sending is always safe: every commit is fenced, so if the original message was only
slow, one of the two commits and the other is dropped. Every worker runs a pass every
`GRAPHRUNNER_SWEEP_INTERVAL` seconds (a Redis lock keeps passes from overlapping);
`graphrunner sweep` runs one now. Expired runs are dropped from the indexes too.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from graphrunner.cluster.runs.operations import hand_on, idle_seconds
from graphrunner.cluster.waits import dispatch, kids
from graphrunner.cluster.waits.base import Wait
from graphrunner.engine import RunSnapshot, RunStatus
from graphrunner.errors import GraphrunnerError
from graphrunner.services.records import SweepRecord
from graphrunner.store import now_ms

if TYPE_CHECKING:
    from graphrunner.cluster.runs.context import Cluster

log = logging.getLogger("graphrunner.sweeper")
BATCH = 500


@dataclass(frozen=True)
class Repair:
    """What the sweeper did for one stalled run."""

    run_id: str
    step: int
    node: str | None
    idle_s: float
    # resent_step | published_outbox | resent_items | resent_join | woke_parent | created_kids
    # | handed_on_key
    action: str


@dataclass
class SweepReport:
    """One pass: how many runs were looked at, what was repaired, what expired."""

    checked: int = 0
    repaired: list[Repair] = field(default_factory=list)
    pruned: int = 0
    skipped: bool = False  # another pass held the lock

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON."""
        return {
            "checked": self.checked,
            "repaired": [asdict(r) for r in self.repaired],
            "pruned": self.pruned,
            "skipped": self.skipped,
        }


def sweep(cluster: Cluster) -> SweepReport:
    """One pass: repair the runs past their progress deadline, hand on keys, drop expired runs."""
    store, settings = cluster.store, cluster.settings
    report = SweepReport()
    if not store.lock_sweep(max(10, int(2 * settings.sweep_interval))):
        report.skipped = True
        return report
    try:
        for run_id in store.stalled(time.time(), BATCH):
            report.checked += 1
            repair = _look_at(cluster, run_id)
            if repair is not None:
                report.repaired.append(repair)
        report.repaired += _pending_keys(cluster)
        report.pruned = store.prune_expired()
        store.swept(now_ms())
    finally:
        store.unlock_sweep()
    for repair in report.repaired:
        log.warning("run %s stalled %.0fs at step %s (%s): %s", *_fields(repair))
    return report


def _fields(repair: Repair) -> tuple[Any, ...]:
    return repair.run_id, repair.idle_s, repair.step + 1, repair.node, repair.action


def _look_at(cluster: Cluster, run_id: str) -> Repair | None:
    """Repair one run past its deadline (or give it a new deadline when nothing is missing)."""
    store, stall_after = cluster.store, cluster.settings.stall_after
    snap = store.load_run(run_id)
    if snap is None or snap.status is not RunStatus.RUNNING:
        return None
    [fields] = store.activity([run_id])
    idle = round(idle_seconds(fields, now_ms()), 1)
    try:
        action = _repair(cluster, snap)
    except GraphrunnerError as exc:  # e.g. its graph cannot be loaded: its next step will say so
        log.warning("run %s is stalled and could not be repaired: %s", run_id, exc)
        action = None
    store.touch(run_id, time.time() + stall_after)  # look again after another STALL_AFTER
    if action is None:
        return None
    record = SweepRecord(step=snap.step + 1, node=snap.node, action=action, idle_s=idle, phase=snap.phase)
    store.note(run_id, record.to_json())
    return Repair(run_id, snap.step, snap.node, idle, action)


def _repair(cluster: Cluster, snap: RunSnapshot) -> str | None:
    """Send again what `snap` is missing, by what it waits for; None when nothing is missing."""
    wait = Wait.from_dict(snap.wait) if snap.wait is not None else None
    if wait is not None and wait.kind == "child":
        return _wake_parent(cluster, snap, wait)
    if wait is not None and wait.kind == "kids":
        return _repair_kids(cluster, snap, wait)
    if wait is not None and wait.kind == "foreach":
        return _resend_items(cluster, snap, wait)
    return _resend_step(cluster, snap)


def _resend_step(cluster: Cluster, snap: RunSnapshot) -> str | None:
    """The run's step message, when it was lost (or is stuck in the run's outbox)."""
    store, publisher = cluster.store, cluster.publisher
    if not store.direct and store.outbox(snap.run_id):
        publisher.flush(snap.run_id)
        return "published_outbox"
    sent = store.sent(snap.run_id)
    if sent is not None and store.timer_due(snap.run_id, sent.tag) is not None:
        return None  # a durable timer that has not come due (or no worker moves timers)
    broker = publisher.broker
    if sent is not None and (broker is None or not broker.lost(sent)):
        return None  # held by a worker (restored if it dies) or waiting on its queue
    graph = cluster.graphs.get(snap.graph_hash)
    publisher.send(snap.run_id, [publisher.step(snap, graph)])
    return "resent_step"


def _wake_parent(cluster: Cluster, snap: RunSnapshot, wait: Wait) -> str | None:
    """Wake a parent whose child has finished (its wake-up was lost); else the child is swept itself."""
    child = cluster.store.load_run(wait.child)
    if child is not None and not child.status.finished:
        return None
    if _queued(cluster):
        return None  # its wake-up may be waiting on the queue: never duplicate a backlog
    graph = cluster.graphs.get(snap.graph_hash)
    cluster.publisher.send(snap.run_id, [cluster.publisher.step(snap, graph, tracked=False)])
    return "woke_parent"


def _repair_kids(cluster: Cluster, snap: RunSnapshot, wait: Wait) -> str | None:
    """Create the open kids that were never created (a worker died after the commit), and wake a
    parent whose kid has finished (its wake-up was lost, unless it may still be queued)."""
    store = cluster.store
    found = {key: store.load_run(f"{wait.child}.{key}") for key in wait.open}
    graph = cluster.graphs.get(snap.graph_hash)
    missing = [key for key, kid in found.items() if kid is None]
    if missing:
        kids.create(cluster, graph, snap, wait, missing)
        return "created_kids"
    if any(kid is not None and kid.status.finished for kid in found.values()) and not _queued(cluster):
        cluster.publisher.send(snap.run_id, [cluster.publisher.step(snap, graph, tracked=False)])
        return "woke_parent"
    return None


def _resend_items(cluster: Cluster, snap: RunSnapshot, wait: Wait) -> str | None:
    """Send the current chunk's missing items again (with the join), when none can be in flight."""
    store = cluster.store
    missing = store.missing_items(snap.run_id, wait.tag, wait.next, wait.upto)
    graph = cluster.graphs.get(snap.graph_hash)
    if not missing:  # every item has its record: the join was lost
        cluster.publisher.send(snap.run_id, [cluster.publisher.step(snap, graph, tracked=False)])
        return "resent_join"
    if _queued(cluster, cluster.publisher.queue_of(graph, snap.node)):
        return None  # items may still be waiting on the queue: never duplicate a backlog
    dispatch.send_chunk(cluster, graph, snap, wait, only=set(missing))
    return "resent_items"


def _queued(cluster: Cluster, queue: str | None = None) -> bool:
    """Messages wait on `queue` (wake-ups go to the default one); False when the broker cannot
    be looked at (RabbitMQ: what is missing is sent, and a duplicate changes nothing)."""
    broker, queue = cluster.publisher.broker, queue or cluster.settings.queue
    return broker is not None and broker.depths([queue])[queue] > 0


def _pending_keys(cluster: Cluster) -> list[Repair]:
    """Hand on concurrency keys whose holder has finished (its worker died before handing on)."""
    repairs = []
    store = cluster.store
    for summary in store.list_runs(status=RunStatus.PENDING.value, limit=BATCH):
        snap = store.load_run(summary.run_id)
        if snap is None or snap.concurrency_key is None:
            continue
        holder_id = store.key_holder(snap.concurrency_key)
        holder = store.load_run(holder_id) if holder_id else None
        if holder is not None and holder.status.finished:
            hand_on(cluster, holder)
            repairs.append(Repair(holder.run_id, holder.step, holder.node, 0.0, "handed_on_key"))
    return repairs
