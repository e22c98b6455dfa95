"""Operations on whole runs: admitting them (concurrency keys), cancelling and resuming them.

Every change is a fenced commit, like a step's: an operation that races a worker either
lands before the worker's commit (which is then fenced off and dropped) or is tried
again on the run as the worker left it. Nothing here waits on a worker.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from graphrunner import engine
from graphrunner.cluster.runs import pauses
from graphrunner.cluster.waits.base import open_children
from graphrunner.cluster.waits.timers import restart
from graphrunner.compiled import CompiledGraph
from graphrunner.engine import RunSnapshot, RunStatus
from graphrunner.errors import CancelError, ResumeError, RunNotFound, RunRefused
from graphrunner.services.records import AdmitRecord, CancelRecord, ResumeRecord, parse, utcnow
from graphrunner.store import Fence, Store, existing_run, now_ms
from graphrunner.telemetry import propagation, spans

if TYPE_CHECKING:
    from graphrunner.cluster.runs.context import Cluster
    from graphrunner.graph import Graph

TRIES = 50  # a busy run moves between our read and our commit: read and try again this often


def idle_seconds(fields: dict[str, str], now: int) -> float:
    """Seconds since the run's last commit or heartbeat, from its record's fields (`now` in ms)."""
    last = max(int(fields.get("updated_at") or 0), int(fields.get("heartbeat") or 0))
    return max(0.0, (now - last) / 1000)


def idle_of(store: Store, run_id: str) -> float | None:
    """Seconds since the run's last commit or heartbeat (None for an unknown run)."""
    [fields] = store.activity([run_id])
    return idle_seconds(fields, now_ms()) if fields else None


# -- concurrency keys ------------------------------------------------------------------------------


def admit(store: Store, snap: RunSnapshot, queue: bool) -> RunSnapshot:
    """Take the run's concurrency key: the snapshot runs now, waits (`pending`), or is refused."""
    assert snap.concurrency_key is not None
    outcome, holder = store.acquire_key(snap.concurrency_key, snap.run_id, queue)
    if outcome == "refused":
        raise RunRefused(
            f"concurrency key {snap.concurrency_key!r} is held by active run {holder}; "
            "nothing was submitted (submit with queueing to wait for it instead)"
        )
    if outcome == "queued":
        return snap.model_copy(update={"status": RunStatus.PENDING})
    return snap


def hand_on(cluster: Cluster, snap: RunSnapshot) -> None:
    """A run holding a concurrency key has finished: start the next run waiting for the key."""
    key = snap.concurrency_key
    if key is None:
        return
    store, released = cluster.store, snap.run_id
    while (next_id := store.release_key(key, released)) is not None:
        waiting = store.load_run(next_id)
        if waiting is not None and waiting.status is RunStatus.PENDING:
            started = waiting.model_copy(update={"status": RunStatus.RUNNING})
            record = AdmitRecord(step=waiting.step + 1, node=waiting.node, key=key, after=released)
            graph = cluster.graphs.get(started.graph_hash)
            if cluster.commit(Fence.of(waiting), started, [record], outs=cluster.following(started, graph)):
                return
        released = next_id  # cancelled (or gone) while it waited: hand the key on again


# -- cancel ------------------------------------------------------------------------------------------


def cancel(cluster: Cluster, run_id: str, reason: str = "cancelled by request") -> RunSnapshot:
    """Cancel a run that has not finished, and its active child runs.

    Nothing more of the run starts: a step in flight finishes but its commit is fenced off,
    its queued messages are dropped, and foreach items not yet started are skipped.
    Raises `RunNotFound`, or `CancelError` for a finished run.
    """
    for _ in range(TRIES):
        snap = existing_run(cluster.store, run_id)
        if snap.status.finished:
            raise CancelError(f"run {run_id} has already finished ({snap.status.value}); nothing to cancel")
        final = snap.model_copy(update={"status": RunStatus.CANCELLED, "wait": None})
        record = CancelRecord(  # about the step the run is at: the one it would take next
            step=snap.step + 1,
            node=snap.node,
            from_=snap.status.value,
            reason=reason,
            at=utcnow().isoformat(),
        )
        if cluster.commit(Fence.of(snap), final, [record], outs=cluster.following(final, None)):
            break
    else:
        raise CancelError(f"run {run_id} kept changing while it was being cancelled; try again")
    spans.cancelled(snap, final)  # where this process traces: its open wait and its run span end
    if snap.status is RunStatus.PENDING and snap.concurrency_key:
        cluster.store.unqueue(snap.concurrency_key, run_id)
    for child in dict.fromkeys((*snap.children, *open_children(snap))):
        _cancel_child(cluster, child, run_id)
    if snap.status is RunStatus.PAUSED:
        pauses.resume_above(cluster, final)  # the runs above that paused with it take in its end
    hand_on(cluster, final)
    return final


def _cancel_child(cluster: Cluster, child_id: str, parent_id: str) -> None:
    with contextlib.suppress(RunNotFound, CancelError):  # never created, or already over
        cancel(cluster, child_id, reason=f"its parent run {parent_id} was cancelled")


# -- resume ------------------------------------------------------------------------------------------


def resume(
    cluster: Cluster,
    run_id: str,
    patch: Mapping[str, Any] | None = None,
    upgrade: Graph | None = None,
) -> RunSnapshot:
    """Continue a failed, cancelled, paused or stalled run at its node, at its step count.

    `patch` is checked against the state schema and merged in. The run stays pinned to the
    graph version it started with, unless `upgrade` (the same graph id, where the run's
    node still exists) re-pins it. A run paused because a run below it paused resumes that run
    instead, with `patch` (its state's), and the runs between go on (`pauses`). Raises
    `RunNotFound` or `ResumeError` (and `StateValidationError` for a bad patch), changing
    nothing then.
    """
    if patch is not None and not isinstance(patch, Mapping):
        raise ResumeError(f"a state patch must be a mapping of field to value, got {type(patch).__name__}")
    store = cluster.store
    snap = existing_run(store, run_id)
    below = pauses.paused_run(cluster, snap)
    if below is not None:  # it paused because a run below it paused: that run goes on
        if upgrade is not None:
            raise ResumeError(
                f"run {run_id} paused below, in run {below.run_id}: resume that run to upgrade it"
            )
        resume(cluster, below.run_id, patch)
        return existing_run(store, run_id)
    _check_resumable(cluster, snap)
    graph = cluster.graphs.get(snap.graph_hash) if upgrade is None else _re_pin(cluster, snap, upgrade)
    at = _as_paused(store, snap)  # a paused run that was cancelled goes on past its pause
    resumed = engine.resume(graph, at, utcnow(), patch, max_state_bytes=cluster.settings.max_state_bytes)
    if snap.status.finished and snap.concurrency_key:
        _retake_key(store, snap)
    running = resumed.status is RunStatus.RUNNING
    wait = restart(snap) if running else None
    # a run whose run span ended (it finished or paused) opens another in the same trace
    trace = snap.trace if snap.status is RunStatus.RUNNING else propagation.resumed(snap.trace)
    resumed = resumed.model_copy(
        update={"phase": snap.phase + 1, "wait": wait, "graph_hash": graph.content_hash, "trace": trace}
    )
    record = ResumeRecord(
        step=snap.step + 1,  # the step it goes on with, as a cancel or sleep record names it
        node=snap.node,
        from_=snap.status.value,
        changed_keys=sorted(patch or {}),
        at=utcnow().isoformat(),
        graph_hash=upgrade.content_hash if upgrade is not None else None,
    )
    if not cluster.commit(Fence.of(snap), resumed, [record], outs=cluster.following(resumed, graph)):
        if snap.status.finished and snap.concurrency_key:
            store.release_key(snap.concurrency_key, run_id)
        raise ResumeError(f"run {run_id} changed while it was being resumed; look at it and try again")
    if resumed.status.finished:  # a pause that was the last node: the run is over
        hand_on(cluster, resumed)
    if snap.status is RunStatus.PAUSED and snap.paused_at is None:
        pauses.resume_above(cluster, resumed)  # the runs above that paused with it go on
    return resumed


def _as_paused(store: Store, snap: RunSnapshot) -> RunSnapshot:
    """`snap` as paused when it was cancelled while paused (its pause node has been taken)."""
    if snap.status is not RunStatus.CANCELLED:
        return snap
    last = parse(store.last_record(snap.run_id))
    if isinstance(last, CancelRecord) and last.from_ == RunStatus.PAUSED.value:
        return snap.model_copy(update={"status": RunStatus.PAUSED})
    return snap


def _check_resumable(cluster: Cluster, snap: RunSnapshot) -> None:
    if snap.status is RunStatus.PENDING:
        raise ResumeError(
            f"run {snap.run_id} is pending: it waits for concurrency key {snap.concurrency_key!r}"
        )
    if snap.status is RunStatus.RUNNING:
        idle = idle_of(cluster.store, snap.run_id)
        stall_after = cluster.settings.stall_after
        if idle is not None and idle <= stall_after:
            raise ResumeError(
                f"run {snap.run_id} is running (last progress {idle:.0f}s ago) and not stalled: a running "
                f"run can be resumed after {stall_after}s without progress (GRAPHRUNNER_STALL_AFTER)"
            )


def _re_pin(cluster: Cluster, snap: RunSnapshot, graph: Graph) -> CompiledGraph:
    """Check that `graph` can take over the run `snap`, and store it for the workers."""
    if graph.id != snap.graph_id:
        raise ResumeError(
            f"cannot upgrade run {snap.run_id} of graph {snap.graph_id!r} to graph {graph.id!r}"
        )
    if snap.node is not None and snap.node not in graph.nodes:
        known = ", ".join(sorted(graph.nodes))
        raise ResumeError(
            f"cannot upgrade run {snap.run_id}: its current node {snap.node!r} is not in the new version "
            f"of {graph.id} (nodes: {known})"
        )
    cluster.graphs.put(graph)
    return graph


def _retake_key(store: Store, snap: RunSnapshot) -> None:
    assert snap.concurrency_key is not None
    outcome, holder = store.acquire_key(snap.concurrency_key, snap.run_id, queue=False)
    if outcome != "acquired":
        raise ResumeError(
            f"run {snap.run_id} cannot be resumed now: its concurrency key {snap.concurrency_key!r} "
            f"is held by active run {holder}"
        )
