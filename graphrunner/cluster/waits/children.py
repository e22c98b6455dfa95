"""Child runs: a subgraph node, a parallel node's branches, a foreach over a graph's items.

One concept: a step that runs graphs starts a *set of child runs*, each a run of its own linked
both ways (the child's `parent` names the step and phase that wait for it; the step's id prefix
is in the parent's `children`), and is suspended on them. No worker waits: each child's last
commit adds the child to its parent step's *ended set* and sends the message that wakes the
step, unless a wake-up is pending or being handled (a flag beside the set: `store.Gather`), so
kids that end close together wake their parent once. The step takes in every child of the set
at once (one read of the set, one of their statuses), starts more, and after its commit lets go:
the kids it counted leave the set, the flag is cleared, and when kids ended meanwhile (they
sent nothing) the step sends itself another wake-up. It completes the node once every child
has ended, reading the children's ends then, a page at a time (the engine projects a subgraph's
state back, merges branches in declaration order, or collects items in item order). Where a
child's commit cannot reach its parent's keys (a Redis Cluster), each wake-up names its child
and the step looks at that one; a subgraph's one child is read when it wakes its parent.

- A subgraph node is a set of one, not keyed (kind `child`): its child is `<run>.<step>`, or
  `<run>.<step>.<phase>` when the step runs its subgraph again.
- Parallel branches are a set keyed by branch, a foreach over a graph a set keyed by item index
  (kind `kids`): child `<base>.<key>`, where `<base>` is the subgraph's id made unique when the
  step ran before (`.r<n>`). A foreach keeps at most its window in flight (a thousand items are
  never a thousand runs at once) and the kids started as the window moves carry later phases,
  so their wake-ups may come from a phase the parent has left (they may take the step over).
  A kid's first snapshot is made once, when the window reaches it: an item that cannot start
  (its inputs fail) is a failed item then. When the step runs again (a resume, an error hook's
  retry), the kids that completed with the same inputs are kept.
- A failing branch (fail_fast) or a foreach past its tolerance cancels the kids still open;
  every commit is fenced, so a wake-up that lost the race changes nothing (and sends another,
  gathered: what it took in is still in the set for the next).
- The parent's record holds the window (the open kids' keys), never the items' results: those
  stay in the kids' records until the node completes, and are read then, a page at a time.
- A child whose capabilities are not its parent's (a run that took its id) is never trusted.
- A kid that pauses pauses its parent, whose step stays suspended on its kids at the same
  phase; resuming the kid sets the parent running again (`cluster/runs/pauses.py`).

The child runs themselves (ids, first snapshots, how one ended) are `cluster/runs/children.py`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Literal

from graphrunner import engine
from graphrunner.cluster.runs import children as child_runs
from graphrunner.cluster.runs import operations
from graphrunner.cluster.runs.ids import fingerprint
from graphrunner.cluster.steps.decisions import Complete, Decision, Idle, Suspend
from graphrunner.cluster.waits.base import Context, Step, WaitKind, open_children, queued, wake
from graphrunner.compiled import CompiledGraph
from graphrunner.engine import (
    ActionFailure,
    BranchOutcome,
    ChildOutcome,
    ForeachOutcome,
    ItemOutcome,
    Outcome,
    ParallelOutcome,
    ParentLink,
    RunSnapshot,
    StepPlan,
    Wait,
)
from graphrunner.engine.failures import RunFailure
from graphrunner.engine.grants import child_grants
from graphrunner.engine.outcomes import FINISHED_OK
from graphrunner.engine.snapshot import FINISHED
from graphrunner.engine.stepping import foreach_fails
from graphrunner.errors import CancelError, GraphrunnerError, RunNotFound
from graphrunner.model import ForeachNode, ParallelNode
from graphrunner.services.records import utcnow
from graphrunner.store import Store

if TYPE_CHECKING:
    from graphrunner.cluster.runs.context import Cluster
    from graphrunner.cluster.transport.messages import Outgoing

ENDED = {status.value for status in FINISHED}
CANCELLED = ChildOutcome(
    "cancelled", error=RunFailure(type="cancelled", message="cancelled: the node stopped waiting")
)
CHILD_CHECKS = 10  # a parent waiting on child runs is looked at every CHILD_CHECKS x stall_after
PAGE = 500  # ended child runs read per round trip (a node's results, when it completes)
CREATE_PAGE = 100  # child runs created per round trip: the first ones start while the rest are made


Firsts = dict[str, tuple[CompiledGraph, RunSnapshot]]  # by key: the child graph and first snapshot


@dataclass(frozen=True)
class KidsIdle(Idle):
    """Nothing to commit: no kid the wake-up told of has ended; `taken`, strays (kids counted
    before, or of an earlier attempt) that leave the step's ended set."""

    taken: tuple[str, ...] = ()


@dataclass(frozen=True)
class KidsSuspend(Suspend):
    """A suspension on child runs: `first`, the step's first (its ended set starts empty); `taken`,
    the ended children (run ids) the commit counts, which then leave the step's ended set; `firsts`,
    the kids to create, made while deciding (each linked to the suspension that waits for it)."""

    first: bool = False
    taken: tuple[str, ...] = ()
    firsts: Firsts = field(default_factory=dict)


class ChildrenWait(Wait):
    """The step waits on its child runs, whose ids start with `child`.

    `open` are running; keys `[0, upto)` of `total` have been reached (started, kept, or found
    unable to start: `bad`, position and message); `failed` counts the children that failed;
    `kept` are the keys whose child completed in an earlier attempt of the step (ids under
    `prior`).
    """

    KEYED: ClassVar[bool] = True

    child: str = ""
    open: tuple[str, ...] = ()
    total: int = 0
    upto: int = 0
    failed: int = 0
    bad: tuple[tuple[int, str], ...] = ()
    prior: str = ""
    kept: tuple[str, ...] = ()

    def deadline(self, now: float, stall_after: float) -> float:
        """Seldom: the children are swept themselves, and wake the step when they end."""
        return now + CHILD_CHECKS * stall_after

    def run_of(self, key: str, *, earlier: bool = False) -> str:
        """The run id of the child `key` (of the earlier attempt's, `earlier`)."""
        return f"{self.prior if earlier else self.child}.{key}"

    def key_of(self, run_id: str) -> str | None:
        """The key of the child run `run_id`; None when it is not one of this step's."""
        prefix = self.child + "."
        return run_id.removeprefix(prefix) if run_id.startswith(prefix) else None


class KidsWait(ChildrenWait):
    """A keyed set: the branches of a parallel node, or the items of a foreach over a graph."""

    waiting_for: ClassVar[str] = "its child runs (branches or foreach children)"

    kind: Literal["kids"] = "kids"


class ChildWait(ChildrenWait):
    """A subgraph's set of one: its child run is `child` itself (no key)."""

    waiting_for: ClassVar[str] = "its child run"

    KEYED: ClassVar[bool] = False

    kind: Literal["child"] = "child"
    open: tuple[str, ...] = ("",)
    total: int = 1
    upto: int = 1

    def run_of(self, key: str, *, earlier: bool = False) -> str:
        """The one child's run id."""
        return self.child

    def key_of(self, run_id: str) -> str | None:
        """ "" for the one child, else None."""
        return "" if run_id == self.child else None


class Children(WaitKind[ChildrenWait]):
    """A subgraph node, a parallel node, a foreach over a graph: a set of child runs."""

    plans = frozenset({"subgraph", "parallel", "foreach"})
    waits = (KidsWait, ChildWait)

    async def start(self, ctx: Context, step: Step, hook_round: int, prior: str) -> Decision | None:
        """Suspend the step on its first children (every branch; a foreach's first window of items;
        a subgraph's child), or complete it when none can start. When the step ran before (a
        resume, an error hook's retry), a kid that completed then is kept, not run again."""
        plan = step.plan
        if plan.kind == "foreach" and plan.child_graph is None:
            return None  # a foreach of actions
        graph, snap = step.graph, step.snap
        keys = keys_of(plan)
        error = child_grants(graph, snap)  # nesting too deep, or asking for more than the run holds
        if isinstance(error, RunFailure):
            return Complete(_all_failed(step, keys, ChildOutcome("failed", error=error)), hook_round)
        model = ChildWait if plan.kind == "subgraph" else KidsWait
        base = child_runs.base_id(snap, plan.step)
        empty: ChildrenWait = model(hook_round=hook_round, child=base, open=(), total=len(keys), upto=0)
        if prior and model.KEYED:
            empty = empty.but(prior=prior)
        wait, firsts = _walk(ctx, step, empty, keys, _window(step, keys, ctx.chunk))
        if not wait.open or _gives_up(step, wait.failed, len(keys)):
            return Complete(_outcome(step, wait, _loaded(ctx.store, snap, wait, keys)), hook_round)
        changes = {"children": (*snap.children, base)}
        return KidsSuspend(wait, changes=changes, kids=wait.open, first=True, firsts=firsts)

    async def join(self, ctx: Context, step: Step, wait: ChildrenWait, woken_by: str) -> Decision:
        """Kids have woken their parent: take in every one that ended, start more, or complete the
        node once every child is done.

        The ended set (and the child a wake-up names) says which kids ended, and one read of
        their statuses whether they failed (a wake-up that names no child, the sweeper's, reads
        every open child's status): nothing else of a kid is read until the node completes, when
        every kid's end is read, a page at a time, to make the node's outcome.
        """
        store, snap = ctx.store, step.snap
        if not wait.KEYED:  # a subgraph's one child: read it, and done once it has ended
            [end] = child_runs.ends(store, snap, [wait.child])
            return KidsIdle() if end is None else Complete(_outcome(step, wait, {"": end}), wait.hook_round)
        ended = store.ended(snap.run_id, snap.step)
        open_keys = set(wait.open)
        keys_ended = {m: wait.key_of(m) for m in ended}
        named = wait.key_of(woken_by) if woken_by else None
        candidates = [
            k for k in dict.fromkeys((*keys_ended.values(), named)) if k is not None and k in open_keys
        ]
        statuses = _statuses(store, wait, wait.open if not woken_by else candidates)
        done = {k: status for k, status in statuses.items() if status in ENDED}
        taken = tuple(m for m, k in keys_ended.items() if k is None or k not in open_keys or k in done)
        if not done:  # a stray or repeated wake-up: the open children wake the parent again
            return KidsIdle(taken)  # strays, if any, leave the set
        still = tuple(k for k in wait.open if k not in done)
        failed = wait.failed + sum(status not in FINISHED_OK for status in done.values())
        keys = keys_of(step.plan)
        if _gives_up(step, failed, wait.total):
            return Complete(_outcome(step, wait, _loaded(store, snap, wait, keys)), wait.hook_round)
        room = _window(step, keys, ctx.chunk) - len(still)
        moved, firsts = _walk(ctx, step, wait.but(open=still, failed=failed), keys, room)
        if not moved.open or _gives_up(step, moved.failed, wait.total):
            return Complete(_outcome(step, moved, _loaded(store, snap, moved, keys)), wait.hook_round)
        return KidsSuspend(moved, kids=moved.open[len(still) :], taken=taken, firsts=firsts)

    def sends(
        self, cluster: Cluster, graph: CompiledGraph, snap: RunSnapshot, wait: ChildrenWait
    ) -> list[Outgoing]:
        """Nothing with the commit: the children are runs of their own, created after it."""
        return []

    def after_commit(
        self, cluster: Cluster, graph: CompiledGraph, snap: RunSnapshot, suspend: Suspend
    ) -> None:
        """Create the children the step now waits for (with their first steps, made when it decided),
        a page per round trip; on the step's first suspension, once its ended set and wake-up flag
        are cleared of an earlier attempt's."""
        assert isinstance(suspend.wait, ChildrenWait)
        first = isinstance(suspend, KidsSuspend) and suspend.first
        if first:
            cluster.store.drop_ended(snap.run_id, snap.step)
        made = suspend.firsts if isinstance(suspend, KidsSuspend) else {}
        create(cluster, graph, snap, suspend.wait, suspend.kids, made)

    def after_step(self, ctx: Context, step: Step, wait: ChildrenWait, decision: Decision, done: str) -> None:
        """A node that is done no longer needs its open children, nor its ended set. Otherwise the
        step lets go of its wake-up (the kids its commit counted leave the ended set, and the flag
        is cleared) and is woken again, gathered, when kids are left in the set: they ended while
        it ran, or it lost the race to another delivery and they are still to be taken in."""
        snap = step.snap
        if isinstance(decision, Complete) and done != "duplicate":
            cancel_open(ctx.cluster, snap, f"node '{step.plan.node}' of its parent run stopped waiting")
            ctx.store.drop_ended(snap.run_id, snap.step)  # with what the cancelled kids added to it
            return
        taken: tuple[str, ...] = ()
        if isinstance(decision, KidsSuspend | KidsIdle) and done in ("suspended", "waiting"):
            taken = decision.taken  # committed (or nothing to commit): they leave the set
        if ctx.store.release_ended(snap.run_id, snap.step, taken) or done == "duplicate":
            _wake_again(ctx.cluster, snap, wait)

    def takes_over(self, wait: ChildrenWait) -> bool:
        """For a keyed set: its kids were started at several phases, and each wakes the step."""
        return wait.KEYED

    def repair(self, cluster: Cluster, snap: RunSnapshot, wait: ChildrenWait) -> str | None:
        """Create the open children that were never created (a worker died after the commit), and
        wake a parent whose child has finished (its wake-up was lost, unless it may still be
        queued); nothing while they run (each is swept itself). One read of their statuses."""
        statuses = cluster.store.activity([wait.run_of(key) for key in wait.open])
        missing = [key for key, fields in zip(wait.open, statuses, strict=True) if "status" not in fields]
        if missing:
            create(cluster, cluster.graphs.get(snap.graph_hash), snap, wait, missing)
            return "created_kids"
        if any(fields.get("status") in ENDED for fields in statuses) and not queued(cluster):
            wake(cluster, snap)
            return "woke_parent"
        return None

    def children(self, wait: ChildrenWait) -> list[str]:
        """The open children."""
        return [wait.run_of(key) for key in wait.open]

    def kept(self, wait: ChildrenWait) -> str:
        """A keyed set's id prefix (a subgraph's child runs again)."""
        return wait.child if wait.KEYED else ""


def keys_of(plan: StepPlan) -> list[str]:
    """The children of the step: branch names in declaration order, item indices, or a
    subgraph's one child (no key)."""
    if plan.kind == "parallel":
        return [b.name for b in plan.branches]
    if plan.kind == "foreach":
        return [str(i) for i in range(len(plan.items or ()))]
    return [""]


def create(
    cluster: Cluster,
    graph: CompiledGraph,
    snap: RunSnapshot,
    wait: ChildrenWait,
    keys: Sequence[str],
    made: Firsts | None = None,
) -> None:
    """Create the children `keys` of the suspended step `snap` (one that exists is left as it is),
    a page of them per round trip, from their first snapshots (`made`, or made here).

    Every one is created before the first error of the store or broker is raised (for a requeue:
    what was created but not sent waits in its run's outbox for the sweeper)."""
    made = made or {}
    plan = engine.prepare(graph, snap, utcnow()) if any(key not in made for key in keys) else None
    limit = cluster.settings.max_state_bytes
    runs: list[tuple[RunSnapshot, CompiledGraph, str]] = []
    for key in keys:
        if key in made:
            child, begun = made[key]
        else:
            assert plan is not None
            try:
                child, begun = child_runs.first_of(
                    cluster.graphs, graph, snap, plan, wait.run_of(key), key, limit
                )
            except (GraphrunnerError, ValueError):  # checked when it was opened: it cannot fail here
                continue
        runs.append((begun, child, fingerprint(child, begun.inputs, begun.capabilities)))
    trouble: GraphrunnerError | None = None
    for start in range(0, len(runs), CREATE_PAGE):
        try:
            cluster.create_runs(runs[start : start + CREATE_PAGE])
        except GraphrunnerError as exc:
            trouble = trouble or exc
    if trouble is not None:
        raise trouble


def cancel_open(cluster: Cluster, snap: RunSnapshot, reason: str) -> None:
    """Cancel the children still running (a branch failed, the foreach gave up, the node is done)."""
    for run_id in open_children(snap):
        with contextlib.suppress(RunNotFound, CancelError):
            operations.cancel(cluster, run_id, reason=reason)


# -- helpers -------------------------------------------------------------------------------------------


def _wake_again(cluster: Cluster, snap: RunSnapshot, wait: ChildrenWait) -> None:
    """Send the step another wake-up, gathered (none when one is pending), naming an open kid so
    that it reads the ended set, not every kid's status; stale (and dropped) once the step has
    moved on. Nothing is read to send it."""
    link = ParentLink(
        run_id=snap.run_id, step=snap.step, phase=snap.phase, graph_id=snap.graph_id, node=snap.node
    )
    named = wait.run_of(wait.open[0]) if wait.open else ""
    wake = cluster.publisher.wake(link, named)  # gathered, adding nobody to the ended set
    assert wake.gather is not None
    gathered = wake.model_copy(update={"gather": (snap.run_id, snap.step, "", wake.gather[3])})
    cluster.publisher.send(snap.run_id, [gathered])


def _window(step: Step, keys: list[str], chunk: int) -> int:
    """How many children run at once: a foreach's window (1 for a sequential one); every branch."""
    spec = step.graph.nodes[step.plan.node].spec
    if not isinstance(spec, ForeachNode):
        return len(keys)
    if not spec.parallel:
        return 1
    return spec.max_concurrency or chunk


def _statuses(store: Store, wait: ChildrenWait, keys: Sequence[str]) -> dict[str, str]:
    """The status of the children `keys`, in one round trip (their records' status field alone)."""
    found = store.activity([wait.run_of(key) for key in keys]) if keys else []
    return {key: fields.get("status", "") for key, fields in zip(keys, found, strict=True)}


def _loaded(store: Store, snap: RunSnapshot, wait: ChildrenWait, keys: list[str]) -> dict[str, ChildOutcome]:
    """Every started child that has ended, read a page at a time; one still running when the node
    gives up is left out (it is cancelled, and counts as neither a result nor a failure)."""
    bad = {i for i, _ in wait.bad}
    wanted = [keys[p] for p in range(wait.upto) if p not in bad]
    ends: dict[str, ChildOutcome] = {}
    for start in range(0, len(wanted), PAGE):
        page = wanted[start : start + PAGE]
        run_ids = [wait.run_of(key, earlier=key in wait.kept) for key in page]
        found = zip(page, child_runs.ends(store, snap, run_ids), strict=True)
        ends.update((key, end) for key, end in found if end is not None)
    return ends


def _walk(
    ctx: Context, step: Step, wait: ChildrenWait, keys: list[str], room: int
) -> tuple[ChildrenWait, Firsts]:
    """Open the next children, from position `wait.upto` on, until `room` are open: each key is
    unstartable (its inputs fail, its graph refuses them: `bad`, and a failure), kept (an earlier
    attempt of the step completed it with the same inputs), or opened, with its first snapshot,
    linked to the suspension that will wait for it (phase + 1). The wait moves past the keys
    walked (`upto`: every key once none is left to open); the kids' first snapshots are made
    once, here, and only for the keys reached."""
    if room <= 0:
        return wait, {}
    snap = step.snap
    linked = snap.model_copy(update={"phase": snap.phase + 1})
    limit = ctx.services.max_state_bytes
    bad, kept, opened, failed = list(wait.bad), list(wait.kept), list(wait.open), wait.failed
    firsts: Firsts = {}
    position = wait.upto
    while position < len(keys) and len(firsts) < room:
        key = keys[position]
        try:
            child, begun = child_runs.first_of(
                ctx.graphs, step.graph, linked, step.plan, wait.run_of(key), key, limit
            )
        except (GraphrunnerError, ValueError) as exc:
            bad.append((position, str(exc)))
            failed += 1
        else:
            prior = wait.run_of(key, earlier=True) if wait.prior else ""
            if prior and child_runs.completed_same(ctx.store, snap, prior, begun):
                kept.append(key)
            else:
                opened.append(key)
                firsts[key] = (child, begun)
        position += 1
    moved = wait.but(open=tuple(opened), upto=position, bad=tuple(bad), kept=tuple(kept), failed=failed)
    return moved, firsts


def _gives_up(step: Step, failed: int, total: int) -> bool:
    """A failed branch of a fail_fast parallel node, or a foreach past its tolerance."""
    spec = step.graph.nodes[step.plan.node].spec
    if isinstance(spec, ParallelNode):
        return failed > 0 and spec.error_policy == "fail_fast"
    if isinstance(spec, ForeachNode):
        return foreach_fails(step.graph, spec, failed, total)
    return False


def _all_failed(step: Step, keys: list[str], end: ChildOutcome) -> Outcome:
    """The node's outcome when every child ended as `end` (none could start)."""
    return _outcome(step, KidsWait(total=len(keys), upto=len(keys)), dict.fromkeys(keys, end))


def _outcome(step: Step, wait: ChildrenWait, ends: dict[str, ChildOutcome]) -> Outcome:
    """The node's outcome from the children's ends (and the children that could not start)."""
    plan = step.plan
    bad = dict(wait.bad)
    if plan.kind == "parallel":
        branches = []
        for position, branch in enumerate(plan.branches):
            end = ends.get(branch.name)
            if position in bad:
                end = ChildOutcome("failed", error=RunFailure(type="node_exception", message=bad[position]))
            branches.append(BranchOutcome(branch.name, end or CANCELLED))
        failed_first = next(
            (b.name for b in branches if not b.child.ok and b.child.status != "cancelled"), None
        )
        return ParallelOutcome(tuple(branches), failed_first)
    if plan.kind != "foreach":  # a subgraph: its one child's end
        if 0 in bad:
            message = f"subgraph '{plan.child_graph}': {bad[0]}"
            return ChildOutcome("failed", error=RunFailure(type="node_exception", message=message))
        return ends.get("") or CANCELLED
    assert plan.items is not None
    items: list[ItemOutcome] = []
    for position in range(wait.upto):
        label = f"item {position} (graph '{plan.child_graph}')"
        if position in bad:
            failure = ActionFailure("validation", f"{label} cannot start: {bad[position]}", "BadItem")
            items.append(ItemOutcome(position, plan.items[position], engine.ActionOutcome(failure=failure)))
        elif str(position) in ends:
            items.append(ends[str(position)].as_item(position, plan.items[position], label))
    return ForeachOutcome(tuple(items))
