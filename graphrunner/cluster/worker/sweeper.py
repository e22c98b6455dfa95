"""The sweeper: finds running runs whose work was lost and sends it again.

Every commit gives a running run a progress deadline (`GRAPHRUNNER_STALL_AFTER` after the
commit, or after the timer it waits for); heartbeats of steps and items in flight push it
on. A pass looks only at runs past their deadline, and repairs precisely what is missing:

- a step message that is neither held by a worker nor waiting on its queue (lost between a
  worker popping it and recording it, or with a broker that restarted without it) is sent
  again; a message still in flight is left alone, so a backlog is never duplicated;
- a message committed to a run's outbox but not published (its worker died in between,
  broker other than the store's Redis) is published;
- a suspended step is repaired by the kind of its wait (`WaitKind.repair`): a foreach whose
  chunk was never sent, or whose items were lost, gets its missing items; a parent whose child
  run has finished but was never woken is woken, and child runs committed but never created
  (their worker died) are created;
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
from graphrunner.cluster.waits.base import kind_of, resend_step
from graphrunner.engine import RunSnapshot, RunStatus
from graphrunner.errors import GraphrunnerError
from graphrunner.services.records import SweepRecord
from graphrunner.store import now_ms
from graphrunner.telemetry import metrics, spans

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
        metrics.repaired(repair.action)
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
    spans.repaired(snap, action)  # the run's trace shows the repair
    return Repair(run_id, snap.step, snap.node, idle, action)


def _repair(cluster: Cluster, snap: RunSnapshot) -> str | None:
    """Send again what `snap` is missing, as the kind of its wait says; None when nothing is missing."""
    if snap.wait is None:
        return resend_step(cluster, snap)
    return kind_of(snap.wait).repair(cluster, snap, snap.wait)


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
