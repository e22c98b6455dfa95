"""Parallel foreach on the cluster: items as chords of item tasks, joined from Redis.

The items are sent in chunks of at most `max_concurrency` (else the executor's chunk size)
items, each chunk a Celery chord whose body is the step's own task at the next phase. The
join never trusts Celery's count: it counts the item results recorded in Redis, waits on
(polls) while some are missing, sends the next chunk, and when every item has a result,
collects them in item order and completes the step. Empty and one-item lists never reach
here (`sequence` runs them in the step's task).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from graphrunner import engine
from graphrunner.cluster import sequence
from graphrunner.cluster.items import call_payload, failed_record
from graphrunner.cluster.waits import Wait
from graphrunner.engine import ActionFailure, RunSnapshot, StepPlan
from graphrunner.graph import Graph
from graphrunner.model import ForeachNode
from graphrunner.runner.local import utcnow

if TYPE_CHECKING:
    from graphrunner.cluster.executor import StepExecutor

POLL_SECONDS = 1.0  # how often a join that fired before every item was recorded looks again


async def start(ex: StepExecutor, graph: Graph, snap: RunSnapshot, plan: StepPlan, hook_round: int) -> str:
    """Start a foreach: parallel with two or more items as chords, otherwise in this task."""
    spec = graph.nodes[plan.node].spec
    assert isinstance(spec, ForeachNode) and plan.items is not None
    total = len(plan.items)
    if not spec.parallel or total <= 1:
        return await sequence.run(ex, graph, snap, plan, None, hook_round)
    size = min(spec.max_concurrency or ex.chunk, ex.chunk)
    tag = f"{plan.step}.{snap.phase + 1}.{uuid.uuid4().hex[:8]}"  # never another attempt's results
    wait = Wait("foreach", hook_round=hook_round, tag=tag, total=total, next=0, upto=min(total, size))
    return ex.suspend_and_send(graph, snap, wait)


def send_chunk(
    ex: StepExecutor, graph: Graph, snap: RunSnapshot, wait: Wait, only: set[int] | None = None
) -> None:
    """Send items `[wait.next, wait.upto)` (those in `only`, when given: the sweeper re-sends
    lost ones) as a chord joined by the step at `snap`'s phase."""
    plan = engine.prepare(graph, snap, utcnow())
    assert plan.items is not None
    node, now = graph.nodes[plan.node], utcnow()
    payloads: list[dict[str, Any]] = []
    for index in range(wait.next, wait.upto):
        if only is not None and index not in only:
            continue
        call = engine.item_call(node, snap, index, plan.items[index], now)
        if isinstance(call, ActionFailure):  # nothing to dispatch: recorded as failed right away
            ex.store.save_item(snap.run_id, wait.tag, index, failed_record(call))
            continue
        payloads.append(
            {
                "run_id": snap.run_id,
                "graph_id": snap.graph_id,
                "graph_hash": snap.graph_hash,
                "step": plan.step,
                "tag": wait.tag,
                "index": index,
                "call": call_payload(call),
            }
        )
    ex.sender.fan_out(snap, graph, payloads)


async def join(ex: StepExecutor, graph: Graph, snap: RunSnapshot, plan: StepPlan, wait: Wait) -> str:
    """A chunk's chord has fired: look again later, send the next chunk, or complete the step."""
    assert plan.items is not None
    if ex.store.count_items(snap.run_id, wait.tag) < wait.upto:
        ex.sender.enqueue(snap, graph, countdown=POLL_SECONDS)
        return "waiting"
    if wait.upto < wait.total:
        size = wait.upto - wait.next
        return ex.suspend_and_send(
            graph, snap, wait.but(next=wait.upto, upto=min(wait.total, wait.upto + size))
        )
    return await sequence.collect(ex, graph, snap, plan, wait.tag, wait.total, wait.hook_round)
