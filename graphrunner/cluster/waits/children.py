"""Child runs: a subgraph node, a parallel node's branches, a foreach over a graph's items.

One concept: a step that runs graphs starts a *set of child runs*, each a run of its own linked
both ways (the child's `parent` names the step and phase that wait for it; the step's id prefix
is in the parent's `children`), and is suspended on them. No worker waits: each child's last
commit sends the message that wakes the parent's step, naming the child, and the step looks
at that child alone, starts more, and completes the node once every child has ended (the
engine projects a subgraph's state back, merges branches in declaration order, or collects
items in item order).

- A subgraph node is a set of one, not keyed (kind `child`): its child is `<run>.<step>`, or
  `<run>.<step>.<phase>` when the step runs its subgraph again.
- Parallel branches are a set keyed by branch, a foreach over a graph a set keyed by item index
  (kind `kids`): child `<base>.<key>`, where `<base>` is the subgraph's id made unique when the
  step ran before (`.r<n>`). A foreach keeps at most its window in flight (a thousand items are
  never a thousand runs at once) and the kids started as the window moves carry later phases,
  so their wake-ups may come from a phase the parent has left (they may take the step over).
  When the step runs again (a resume, an error hook's retry), the kids that completed are kept.
- A failing branch (fail_fast) or a foreach past its tolerance cancels the kids still open;
  every commit is fenced, so a wake-up that lost the race changes nothing (and looks again).
- A child whose capabilities are not its parent's (a run that took its id) is never trusted.

The child runs themselves (ids, first snapshots, how one ended) are `cluster/runs/children.py`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
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
    RunSnapshot,
    RunStatus,
    StepPlan,
    Wait,
)
from graphrunner.engine.failures import RunFailure
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


class ChildrenWait(Wait):
    """The step waits on its child runs, whose ids start with `child`.

    `open` are running; keys `[0, upto)` of `total` have been started, and `bad` lists those
    that could not start (position, message); `failed` counts the children that failed; `kept`
    are the keys whose child completed in an earlier attempt of the step (ids under `prior`).
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
        error = engine.too_deep(graph, snap)
        if error is not None:
            return Complete(_all_failed(step, keys, ChildOutcome("failed", error=error)), hook_round)
        model = ChildWait if plan.kind == "subgraph" else KidsWait
        base = child_runs.base_id(snap, plan.step)
        firsts = child_runs.firsts(
            ctx.graphs, graph, snap, step.plan, base, keys, ctx.services.max_state_bytes
        )
        bad = tuple((keys.index(k), f) for k, f in firsts.items() if isinstance(f, str))
        wait = model(hook_round=hook_round, child=base, open=(), total=len(keys), upto=0, bad=bad)
        if prior and model.KEYED:
            wait = wait.but(prior=prior)
            kept = tuple(
                k
                for k, f in firsts.items()
                if child_runs.completed_same(ctx.store, snap, wait.run_of(k, earlier=True), f)
            )
            wait = wait.but(kept=kept)
        opened, upto = _refill(keys, wait, _window(step, keys, ctx.chunk))
        wait = wait.but(open=opened, upto=upto, failed=len(bad))
        if not opened or _gives_up(step, len(bad), len(keys)):
            return Complete(_outcome(step, wait, _loaded(ctx.store, snap, wait, keys)), hook_round)
        return Suspend(wait, changes={"children": (*snap.children, base)}, kids=opened)

    async def join(self, ctx: Context, step: Step, wait: ChildrenWait, woken_by: str) -> Decision:
        """A child has woken its parent: start more, or complete the node once every child is done.

        A wake-up that names its child (`woken_by`) looks at that child alone, so N children cost
        N loads; one that does not (the sweeper's, a lost race's) reads every open child's status.
        """
        store, snap = ctx.store, step.snap
        named = wait.key_of(woken_by)
        candidates = ([named] if named in wait.open else []) if named is not None else _finished(store, wait)
        ends = {key: child_runs.end(store, snap, wait.run_of(key)) for key in candidates}
        done = {k: e for k, e in ends.items() if e is not None}
        if not done:
            return Idle()  # a stray or repeated wake-up: the open children wake the parent again
        still = tuple(k for k in wait.open if k not in done)
        failed = wait.failed + sum(not e.ok for e in done.values())
        keys = keys_of(step.plan)
        if _gives_up(step, failed, wait.total):
            return Complete(_outcome(step, wait, _loaded(store, snap, wait, keys, done)), wait.hook_round)
        fresh, upto = _refill(keys, wait, _window(step, keys, ctx.chunk) - len(still))
        if not still and not fresh:
            return Complete(_outcome(step, wait, _loaded(store, snap, wait, keys, done)), wait.hook_round)
        return Suspend(wait.but(open=(*still, *fresh), upto=upto, failed=failed), kids=fresh)

    def sends(
        self, cluster: Cluster, graph: CompiledGraph, snap: RunSnapshot, wait: ChildrenWait
    ) -> list[Outgoing]:
        """Nothing with the commit: the children are runs of their own, created after it."""
        return []

    def after_commit(
        self, cluster: Cluster, graph: CompiledGraph, snap: RunSnapshot, suspend: Suspend
    ) -> None:
        """Create the children the step now waits for (with their first steps)."""
        assert isinstance(suspend.wait, ChildrenWait)
        create(cluster, graph, snap, suspend.wait, suspend.kids)

    def after_step(self, ctx: Context, step: Step, wait: ChildrenWait, decision: Decision, done: str) -> None:
        """A step that lost the race looks again (the winner may not have seen the child that woke
        this one); a node that is done no longer needs its open children."""
        if done == "duplicate":
            _look_again(ctx.cluster, step.snap.run_id)
        elif isinstance(decision, Complete):
            cancel_open(ctx.cluster, step.snap, f"node '{step.plan.node}' of its parent run stopped waiting")

    def takes_over(self, wait: ChildrenWait) -> bool:
        """For a keyed set: its kids were started at several phases, and each wakes the step."""
        return wait.KEYED

    def repair(self, cluster: Cluster, snap: RunSnapshot, wait: ChildrenWait) -> str | None:
        """Create the open children that were never created (a worker died after the commit), and
        wake a parent whose child has finished (its wake-up was lost, unless it may still be
        queued); nothing while they run (each is swept itself)."""
        found = {key: cluster.store.load_run(wait.run_of(key)) for key in wait.open}
        missing = [key for key, kid in found.items() if kid is None]
        if missing:
            create(cluster, cluster.graphs.get(snap.graph_hash), snap, wait, missing)
            return "created_kids"
        if any(kid is not None and kid.status.finished for kid in found.values()) and not queued(cluster):
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
    cluster: Cluster, graph: CompiledGraph, snap: RunSnapshot, wait: ChildrenWait, keys: Sequence[str]
) -> None:
    """Create the children `keys` of the suspended step `snap` (one that exists is left as it is).

    Every one is created before the first error of the store or broker is raised (for a requeue:
    what was created but not sent waits in its run's outbox for the sweeper)."""
    plan = engine.prepare(graph, snap, utcnow())
    limit = cluster.settings.max_state_bytes
    trouble: GraphrunnerError | None = None
    for key in keys:
        try:
            child, begun = child_runs.first_of(
                cluster.graphs, graph, snap, plan, wait.run_of(key), key, limit
            )
        except (GraphrunnerError, ValueError):  # checked at start: it cannot fail here
            continue
        try:
            cluster.create_run(begun, child, fingerprint(child, begun.inputs, begun.capabilities))
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


def _look_again(cluster: Cluster, run_id: str) -> None:
    """Send the run's step once more when it still waits on children (a wake-up lost a race)."""
    current = cluster.store.load_run(run_id)
    if current is not None and current.status is RunStatus.RUNNING and isinstance(current.wait, ChildrenWait):
        wake(cluster, current)


def _window(step: Step, keys: list[str], chunk: int) -> int:
    """How many children run at once: a foreach's window (1 for a sequential one); every branch."""
    spec = step.graph.nodes[step.plan.node].spec
    if not isinstance(spec, ForeachNode):
        return len(keys)
    if not spec.parallel:
        return 1
    return spec.max_concurrency or chunk


def _finished(store: Store, wait: ChildrenWait) -> list[str]:
    """The open children that have finished, read in one round trip (their status alone): only
    those are loaded, so a wake-up costs one read of the window and a load of what finished."""
    statuses = store.activity([wait.run_of(key) for key in wait.open])
    return [key for key, fields in zip(wait.open, statuses, strict=True) if fields.get("status") in ENDED]


def _loaded(
    store: Store,
    snap: RunSnapshot,
    wait: ChildrenWait,
    keys: list[str],
    known: dict[str, ChildOutcome] | None = None,
) -> dict[str, ChildOutcome]:
    """Every started child that has ended (`known`: those just loaded); one still running when the
    node gives up is left out (it is cancelled, and counts as neither a result nor a failure)."""
    ends: dict[str, ChildOutcome] = {}
    bad = {i for i, _ in wait.bad}
    known = known or {}
    for position in range(wait.upto):
        key = keys[position]
        if position not in bad:
            end = known.get(key) or child_runs.end(store, snap, wait.run_of(key, earlier=key in wait.kept))
            if end is not None:
                ends[key] = end
    return ends


def _refill(keys: list[str], wait: ChildrenWait, room: int) -> tuple[tuple[str, ...], int]:
    """The next children to start from position `wait.upto` on (neither unstartable nor kept), to
    fill `room` places, and the new `upto`: just past the last of them while children are left
    to start, else every key. One pass over the keys."""
    if room <= 0:
        return (), wait.upto
    skip = {i for i, _ in wait.bad} | {i for i, key in enumerate(keys) if key in wait.kept}
    fresh: list[str] = []
    last = wait.upto
    for position in range(wait.upto, len(keys)):
        if position in skip:
            continue
        if len(fresh) == room:
            return tuple(fresh), last + 1
        fresh.append(keys[position])
        last = position
    return tuple(fresh), len(keys)


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
