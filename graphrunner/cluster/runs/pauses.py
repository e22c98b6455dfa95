"""A pause below a run: the runs above it pause with it, and go on when it is resumed.

A child run (a subgraph's, a parallel branch, a foreach child, at any depth) that pauses parks
the step of its parent that waits for it: the parent's status becomes `paused`, with where it
paused (`paused_at`: the child run, its branch or item index, the run parked at its pause node
and the pause's message), and so on up the chain. The parent's step stays suspended on its
children, at the same phase (its children's links still name it): nothing of the step is lost.
Resuming the paused run sets the runs above it back to `running`, and each is woken once, to
take in what its other children did meanwhile; the resumed child wakes its parent when it ends,
as any child does. Resuming a run paused below resumes the run parked at the pause instead.
Every change is a fenced commit: a parent that moved meanwhile is left as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from graphrunner.cluster.waits.base import open_children, wake
from graphrunner.engine import RunSnapshot, RunStatus
from graphrunner.engine.failures import ParentLink
from graphrunner.engine.snapshot import PausedAt
from graphrunner.model import ForeachNode, ParallelNode
from graphrunner.store import Fence

if TYPE_CHECKING:
    from graphrunner.cluster.runs.context import Cluster

TRIES = 20  # a parent busy with another child moves between our read and our commit: try again


def pause_above(cluster: Cluster, child: RunSnapshot) -> None:
    """The run `child` has paused: pause every run above it whose step waits for it."""
    while child.parent is not None:
        parent = _pause_parent(cluster, child.parent, child)
        if parent is None:
            return
        child = parent


def resume_above(cluster: Cluster, child: RunSnapshot) -> None:
    """The run `child` was resumed: every run above it that was paused on it runs again."""
    while child.parent is not None:
        parent = _resume_parent(cluster, child.parent, child.run_id)
        if parent is None:
            return
        child = parent


def paused_run(cluster: Cluster, snap: RunSnapshot) -> RunSnapshot | None:
    """The run parked at the pause node below the paused run `snap`, when it paused below."""
    if snap.status is not RunStatus.PAUSED or snap.paused_at is None:
        return None
    below = cluster.store.load_run(snap.paused_at.paused_run)
    return below if below is not None and below.status is RunStatus.PAUSED else None


def _pause_parent(cluster: Cluster, link: ParentLink, child: RunSnapshot) -> RunSnapshot | None:
    for _ in range(TRIES):
        snap = cluster.store.load_run(link.run_id)
        if not _waits_for(snap, link, child.run_id):
            return None
        assert snap is not None
        where = _where(cluster, snap, child)
        update = {"status": RunStatus.PAUSED, "pause_message": where.message, "paused_at": where}
        paused = snap.model_copy(update=update)
        if cluster.commit(Fence.of(snap), paused):
            return paused
    return None


def _resume_parent(cluster: Cluster, link: ParentLink, child_id: str) -> RunSnapshot | None:
    for _ in range(TRIES):
        snap = cluster.store.load_run(link.run_id)
        if snap is None or snap.status is not RunStatus.PAUSED or snap.paused_at is None:
            return None
        if snap.paused_at.run_id != child_id or snap.step != link.step:
            return None
        running = snap.model_copy(
            update={"status": RunStatus.RUNNING, "pause_message": None, "paused_at": None}
        )
        if cluster.commit(Fence.of(snap), running):
            wake(cluster, running)  # to take in the children that ended while it was paused
            return running
    return None


def _waits_for(snap: RunSnapshot | None, link: ParentLink, child_id: str) -> bool:
    """The parent `snap` runs the step of `link`, suspended on the child run `child_id`."""
    if snap is None or snap.status is not RunStatus.RUNNING or snap.step != link.step:
        return False
    return child_id in open_children(snap)


def _where(cluster: Cluster, snap: RunSnapshot, child: RunSnapshot) -> PausedAt:
    """Where the child of `snap` paused: its branch name or item index, from its run id's key."""
    spec = cluster.graphs.get(snap.graph_hash).nodes[snap.node].spec if snap.node else None
    key = child.run_id.rsplit(".", 1)[-1]
    if isinstance(spec, ParallelNode):
        branch = next((b for b in spec.branches if child.run_id.endswith(f".{b}")), key)
        return PausedAt.of_child(child, branch=branch)
    if isinstance(spec, ForeachNode) and key.isdigit():
        return PausedAt.of_child(child, index=int(key))
    return PausedAt.of_child(child)
