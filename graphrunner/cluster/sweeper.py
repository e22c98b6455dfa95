"""The sweeper: finds running runs that stopped making progress and sends their work again.

A run is stalled when it is `running` and neither a commit nor a heartbeat (steps and
items in flight beat, see `heartbeat`) has touched it for `GRAPHRUNNER_STALL_AFTER`
seconds: its worker vanished, or its message was lost. Sending the step again is always
safe, because every commit is fenced: if the original message was only slow, one of the
two commits and the other is dropped. A pass runs from the beat schedule (a worker with
`-B`, or `celery beat`) every `GRAPHRUNNER_SWEEP_INTERVAL` seconds, or once with
`graphrunner sweep`; a Redis lock keeps passes from overlapping.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graphrunner.cluster import fanout
from graphrunner.cluster.waits import Wait
from graphrunner.engine import RunSnapshot, RunStatus
from graphrunner.errors import GraphrunnerError
from graphrunner.store import RedisStore
from graphrunner.store.redis_store import now_ms

if TYPE_CHECKING:
    from graphrunner.cluster.app import Runtime

log = logging.getLogger("graphrunner.sweeper")
BATCH = 500


@dataclass(frozen=True)
class Repair:
    """What the sweeper did for one stalled run."""

    run_id: str
    step: int
    node: str | None
    idle_s: float
    action: str  # resent_step | resent_items | woke_parent


@dataclass
class SweepReport:
    """One pass: how many running runs were looked at, what was repaired, what expired."""

    checked: int = 0
    repaired: list[Repair] = field(default_factory=list)
    pruned: int = 0
    skipped: bool = False  # another pass held the lock

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON."""
        return {
            "checked": self.checked,
            "repaired": [r.__dict__ for r in self.repaired],
            "pruned": self.pruned,
            "skipped": self.skipped,
        }


def idle_seconds(fields: dict[str, str], now_ms: int) -> float:
    """Seconds since the run's last commit or heartbeat, from its record's fields."""
    last = max(int(fields.get("updated_at") or 0), int(fields.get("heartbeat") or 0))
    return max(0.0, (now_ms - last) / 1000)


def idle_of(store: RedisStore, run_id: str) -> float | None:
    """Seconds since the run's last commit or heartbeat (None for an unknown run)."""
    [fields] = store.activity([run_id])
    return idle_seconds(fields, now_ms()) if fields else None


def sweep(runtime: Runtime) -> SweepReport:
    """One pass over the running runs: repair the stalled ones, then drop expired runs' index entries."""
    store, settings = runtime.store, runtime.settings
    report = SweepReport()
    if not store.lock_sweep(max(settings.sweep_interval, settings.stall_after)):
        report.skipped = True
        return report
    try:
        ids = store.running_ids()
        for start in range(0, len(ids), BATCH):
            batch = ids[start : start + BATCH]
            now = now_ms()
            for run_id, fields in zip(batch, store.activity(batch), strict=True):
                report.checked += 1
                idle = idle_seconds(fields, now)
                if fields.get("status") == RunStatus.RUNNING.value and idle > settings.stall_after:
                    repair = _repair(runtime, run_id, idle)
                    if repair is not None:
                        report.repaired.append(repair)
        report.pruned = store.prune_expired()
    finally:
        store.unlock_sweep()
    return report


def _repair(runtime: Runtime, run_id: str, idle: float) -> Repair | None:
    """Send the stalled run's work again (or nothing, when it is only waiting as it should)."""
    store = runtime.store
    snap = store.load_run(run_id)
    if snap is None or snap.status is not RunStatus.RUNNING:
        return None
    try:
        action = _resend(runtime, snap)
    except GraphrunnerError as exc:  # e.g. its graph cannot be loaded: the next step will say so
        log.warning("run %s is stalled and could not be repaired: %s", run_id, exc)
        return None
    store.beat([run_id])  # not again before another GRAPHRUNNER_STALL_AFTER
    if action is None:
        return None
    log.warning("run %s stalled %.0fs at step %s (%s): %s", run_id, idle, snap.step + 1, snap.node, action)
    record = {
        "step": snap.step,
        "node": snap.node,
        "status": "swept",
        "action": action,
        "idle_s": round(idle, 1),
        "phase": snap.phase,
    }
    store.note(run_id, record)
    return Repair(run_id, snap.step, snap.node, round(idle, 1), action)


def _resend(runtime: Runtime, snap: RunSnapshot) -> str | None:
    wait = Wait.from_dict(snap.wait) if snap.wait is not None else None
    graph = runtime.executor.graphs.get(snap.graph_hash)
    if wait is not None and wait.remaining() > 0:
        return None  # a retry backoff or a durable sleep that has not come due
    if wait is not None and wait.kind == "child":
        child = runtime.store.load_run(wait.child)
        if child is not None and not child.status.finished:
            return None  # the child is swept on its own
        runtime.enqueue(snap, graph)
        return "woke_parent"
    if wait is not None and wait.kind == "foreach":
        missing = runtime.store.missing_items(snap.run_id, wait.tag, wait.next, wait.upto)
        if missing:
            fanout.send_chunk(runtime.executor, graph, snap, wait, only=set(missing))
            return "resent_items"
    runtime.enqueue(snap, graph)
    return "resent_step"
