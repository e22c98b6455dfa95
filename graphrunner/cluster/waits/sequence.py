"""Foreach items run one at a time in the step's task, checkpointed after every item.

Used for sequential foreach and for parallel lists of zero or one item (which never reach
Celery's chord code). Each item's result is recorded and the step's phase bumped (a fenced
checkpoint), so a task that dies mid-loop is taken over from the next item, and finished
items are not run again. The executor drives the loop; after `loop_slice` seconds it hands
on to a fresh task, so a long foreach never holds one message for long.
"""

from __future__ import annotations

import time
import uuid

from graphrunner import engine
from graphrunner.cluster.steps.decisions import Checkpoint, Collect, Decision, Suspend
from graphrunner.cluster.steps.item_runner import record_of
from graphrunner.cluster.waits.base import Wait
from graphrunner.compiled import CompiledGraph
from graphrunner.engine import ActionFailure, ActionOutcome, RunSnapshot, StepPlan
from graphrunner.engine.step import foreach_fails
from graphrunner.model import ForeachNode
from graphrunner.services import Deferred, StepServices, tool_context
from graphrunner.services.records import utcnow


def first(snap: RunSnapshot, plan: StepPlan, hook_round: int) -> Wait:
    """The wait of a foreach whose items start running in this task."""
    assert plan.items is not None
    tag = f"{plan.step}.{snap.phase}.{uuid.uuid4().hex[:8]}"
    return Wait("items", hook_round=hook_round, tag=tag, total=len(plan.items))


async def next_item(
    services: StepServices, graph: CompiledGraph, snap: RunSnapshot, plan: StepPlan, wait: Wait
) -> Decision:
    """Run item `wait.next`: checkpoint it, collect when it was the last (or failed the node),
    or suspend while it waits (a retry backoff, a durable sleep)."""
    spec = graph.nodes[plan.node].spec
    assert isinstance(spec, ForeachNode)
    index = wait.next
    if index >= wait.total:  # nothing (left) to run: an empty list
        return Collect(wait.tag, index, wait.hook_round)
    outcome = await _item(services, graph, snap, plan, wait)
    if isinstance(outcome, Deferred):
        return Suspend(_deferred(wait, outcome))
    item = (index, record_of(outcome))
    done = wait.but(next=index + 1, failed=wait.failed + (not outcome.ok), due=None, attempt=1, timer=None)
    if foreach_fails(graph, spec, done.failed, done.total) or done.next == done.total:
        return Collect(wait.tag, done.next, wait.hook_round, item)
    return Checkpoint(done, item)


async def _item(
    services: StepServices, graph: CompiledGraph, snap: RunSnapshot, plan: StepPlan, wait: Wait
) -> ActionOutcome | Deferred:
    """Dispatch item `wait.next`, going on from its attempt or timer when it waited."""
    assert plan.items is not None
    index = wait.next
    call = engine.item_call(graph.nodes[plan.node], snap, index, plan.items[index], utcnow())
    if isinstance(call, ActionFailure):
        return ActionOutcome(failure=call)
    context = tool_context(snap, plan.node, plan.step, index)
    return await services.durable_call(snap.graph_hash, call, context, attempt=wait.attempt, timer=wait.timer)


def _deferred(wait: Wait, deferred: Deferred) -> Wait:
    """The wait of an item that asked to wait: its backoff or durable sleep, then go on at it."""
    return wait.but(due=time.time() + deferred.delay, attempt=deferred.attempt, timer=deferred.timer)
