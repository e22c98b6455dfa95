"""Sending what a suspended step waits for, after its commit: a foreach chunk, a child run.

Both are sent after the commit that suspends the step (a chord is published by Celery; a
child run is a run of its own), so a worker can die in between; the sweeper then sends them
again: only the items still missing, and the child only if it does not exist yet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from graphrunner import engine
from graphrunner.cluster.runs.ids import fingerprint
from graphrunner.cluster.waits import children
from graphrunner.cluster.waits import foreach as fanout
from graphrunner.cluster.waits.base import Wait
from graphrunner.compiled import CompiledGraph
from graphrunner.engine import RunSnapshot
from graphrunner.services.records import utcnow

if TYPE_CHECKING:
    from graphrunner.cluster.runs.context import Cluster


def send_chunk(
    cluster: Cluster, graph: CompiledGraph, snap: RunSnapshot, wait: Wait, only: set[int] | None = None
) -> None:
    """Send items `[wait.next, wait.upto)` of the suspended foreach `snap` (those in `only`, when
    given) as a chord joined by the step; items that cannot be dispatched are recorded failed."""
    payloads, failed = fanout.chunk(graph, snap, wait, only)
    for index, record in failed:
        cluster.save_item(snap.run_id, wait.tag, index, record)
    publisher = cluster.publisher
    queue, shadow = publisher.queue_of(graph, snap.node), f"{snap.graph_id}:{snap.node}:item"
    join = publisher.step(snap, graph, tracked=False)
    publisher.fan_out(join, [publisher.item(p, queue, shadow) for p in payloads])


def start_child(cluster: Cluster, graph: CompiledGraph, snap: RunSnapshot, wait: Wait) -> bool:
    """Create the child run the suspended step `snap` waits for, with its first step (in one
    write); False when it existed already."""
    plan = engine.prepare(graph, snap, utcnow())
    limit = cluster.settings.max_state_bytes
    child, first = children.first(cluster.graphs, graph, snap, plan, wait.child, snap.phase, limit)
    return cluster.create_run(first, child, fingerprint(child, first.inputs, first.capabilities)).created
