"""Parallel foreach items (kind `foreach`): item tasks sent in chunks, joined from Redis.

The items are sent in chunks of at most `max_concurrency` (else the executor's chunk size)
items, `batch_size` items to a message, after the commit that suspends the step (once per
phase). Each item records its result in Redis; the item task whose save records the chunk's
last item (the items hash reaches `upto` fields: only a new record grows it, so once) sends the
step's join. The join never trusts a message: it counts the item records, looks again later
while some are missing, sends the next chunk, and when every item has a result, the step
collects them in item order, a page at a time. Empty and one-item lists never reach here
(`sequence` runs them in the step's task). The sweeper sends a chunk's missing items again, or
its join when every item has its record (a worker died between the save and the join).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from graphrunner import engine
from graphrunner.cluster.runs.items import ItemRecord, call_payload, failed_record
from graphrunner.cluster.steps.decisions import Collect, Decision, Poll, Suspend
from graphrunner.cluster.waits.base import Context, Step, WaitKind, queued, wake
from graphrunner.compiled import CompiledGraph
from graphrunner.engine import ActionFailure, RunSnapshot, Wait
from graphrunner.model import ForeachNode
from graphrunner.services.records import utcnow
from graphrunner.telemetry import spans

if TYPE_CHECKING:
    from graphrunner.cluster.runs.context import Cluster
    from graphrunner.cluster.transport.messages import Outgoing

POLL_SECONDS = 1.0  # how often a join that fired before every item was recorded looks again


class ForeachWait(Wait):
    """Parallel items `[next, upto)` of `total` have been sent; their results are under `tag`."""

    waiting_for: ClassVar[str] = "its foreach items"

    kind: Literal["foreach"] = "foreach"
    tag: str = ""
    total: int = 0
    upto: int = 0
    next: int = 0


class Foreach(WaitKind[ForeachWait]):
    """A parallel foreach of actions over two or more items."""

    plans = frozenset({"foreach"})
    waits = (ForeachWait,)

    async def start(self, ctx: Context, step: Step, hook_round: int, prior: str) -> Decision | None:
        """Suspend the step on its first chunk of items."""
        if not parallel(step):
            return None
        plan = step.plan
        spec = step.graph.nodes[plan.node].spec
        assert isinstance(spec, ForeachNode) and plan.items is not None
        total = len(plan.items)
        size = min(spec.max_concurrency or ctx.chunk, ctx.chunk)
        tag = f"{plan.step}.{step.snap.phase + 1}.{uuid.uuid4().hex[:8]}"  # never another attempt's results
        return Suspend(ForeachWait(hook_round=hook_round, tag=tag, total=total, upto=min(total, size)))

    async def join(self, ctx: Context, step: Step, wait: ForeachWait, woken_by: str) -> Decision:
        """A chunk's last item is recorded: send the next chunk, or collect them all (look again
        later while items are missing: a join the sweeper sent, a duplicate)."""
        if ctx.store.count_items(step.snap.run_id, wait.tag) < wait.upto:
            return Poll(POLL_SECONDS)
        if wait.upto < wait.total:
            size = wait.upto - wait.next
            return Suspend(wait.but(next=wait.upto, upto=min(wait.total, wait.upto + size)))
        return Collect(wait.tag, wait.total, wait.hook_round)

    def sends(
        self, cluster: Cluster, graph: CompiledGraph, snap: RunSnapshot, wait: ForeachWait
    ) -> list[Outgoing]:
        """Nothing with the commit: the chunk's items are sent after it (their last sends the join)."""
        return []

    def after_commit(
        self, cluster: Cluster, graph: CompiledGraph, snap: RunSnapshot, suspend: Suspend
    ) -> None:
        """Send the chunk the step now waits for (once per phase)."""
        assert isinstance(suspend.wait, ForeachWait)
        if cluster.store.claim_dispatch(snap.run_id, snap.phase):
            send_chunk(cluster, graph, snap, suspend.wait)

    def repair(self, cluster: Cluster, snap: RunSnapshot, wait: ForeachWait) -> str | None:
        """Send the chunk's missing items again (the last recorded sends the join), when none can
        be in flight; or the join alone when every item has its record."""
        missing = cluster.store.missing_items(snap.run_id, wait.tag, wait.next, wait.upto)
        if not missing:  # every item has its record: the join was lost
            wake(cluster, snap)
            return "resent_join"
        graph = cluster.graphs.get(snap.graph_hash)
        if queued(cluster, cluster.publisher.queue_of(graph, snap.node)):
            return None  # items may still be waiting on the queue: never duplicate a backlog
        send_chunk(cluster, graph, snap, wait, only=set(missing))
        return "resent_items"


def parallel(step: Step) -> bool:
    """The step is a foreach of actions that runs its items as item tasks (parallel, two or more)."""
    plan = step.plan
    if plan.kind != "foreach" or plan.child_graph is not None:
        return False
    spec = step.graph.nodes[plan.node].spec
    assert isinstance(spec, ForeachNode) and plan.items is not None
    return spec.parallel and len(plan.items) > 1


def send_chunk(
    cluster: Cluster, graph: CompiledGraph, snap: RunSnapshot, wait: ForeachWait, only: set[int] | None = None
) -> None:
    """Send items `[wait.next, wait.upto)` of the suspended foreach `snap` (those in `only`, when
    given), `batch_size` to a message; items that cannot be dispatched are recorded failed, and
    when one of those is the chunk's last record, the join is sent."""
    publisher = cluster.publisher
    queue, shadow = publisher.queue_of(graph, snap.node), f"{snap.graph_id}:{snap.node}:item"
    failed: list[tuple[int, ItemRecord]] = []
    publisher.fan_out(publisher.item(p, queue, shadow) for p in chunk(graph, snap, wait, failed, only))
    if failed and cluster.save_items(snap.run_id, wait.tag, failed, wait.upto):
        wake(cluster, snap)


def chunk(
    graph: CompiledGraph,
    snap: RunSnapshot,
    wait: ForeachWait,
    failed: list[tuple[int, ItemRecord]],
    only: set[int] | None = None,
) -> Iterator[dict[str, Any]]:
    """The item message payloads of `[wait.next, wait.upto)` (those in `only`, when given: the
    sweeper re-sends lost ones), `batch_size` items to a payload, made as they are asked for;
    the records of items that cannot be dispatched (failed at once) go to `failed`."""
    plan = engine.prepare(graph, snap, utcnow())
    assert plan.items is not None
    node, now = graph.nodes[plan.node], utcnow()
    spec = node.spec
    assert isinstance(spec, ForeachNode)
    size = spec.batch_size or 1
    head = {
        "run_id": snap.run_id,
        "graph_id": snap.graph_id,
        "graph_hash": snap.graph_hash,
        "step": plan.step,
        "tag": wait.tag,
        "phase": snap.phase,
        "upto": wait.upto,
        **spans.item_parent(snap),  # the items' spans hang under the step's wait span
    }
    batch: list[dict[str, Any]] = []
    for index in range(wait.next, wait.upto):
        if only is not None and index not in only:
            continue
        call = engine.item_call(node, snap, index, plan.items[index], now)
        if isinstance(call, ActionFailure):
            failed.append((index, failed_record(call)))
            continue
        batch.append({"index": index, "call": call_payload(call)})
        if len(batch) == size:
            yield _payload(head, batch)
            batch = []
    if batch:
        yield _payload(head, batch)


def _payload(head: dict[str, Any], batch: list[dict[str, Any]]) -> dict[str, Any]:
    """The payload of an item message running `batch` (its first item, and the rest as `batch`)."""
    first, rest = batch[0], batch[1:]
    return {**head, **first, **({"batch": rest} if rest else {})}
