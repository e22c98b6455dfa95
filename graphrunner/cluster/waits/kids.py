"""Parallel nodes and foreach over a graph on the cluster: a set of child runs ("kids").

The parent's step is suspended on a `kids` wait and no worker waits for them: each kid's last
commit wakes the parent (whatever phase it was started in), whose step looks at the kids still
open, starts more (a foreach keeps at most its window in flight, so a thousand items are never
a thousand runs at once), and completes the node once all are done: the engine then merges
branches in declaration order, or collects items in item order. A failing branch (fail_fast)
or a foreach past its tolerance cancels the kids still open. Every commit is fenced, so a
wake-up that lost the race changes nothing (and looks again).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graphrunner import engine
from graphrunner.cluster.runs.graphs import GraphCache
from graphrunner.cluster.runs.ids import fingerprint
from graphrunner.cluster.runs.operations import cancel
from graphrunner.cluster.steps.decisions import Complete, Decision, Idle, Suspend
from graphrunner.cluster.waits.base import Wait, open_kids
from graphrunner.cluster.waits.children import child_run_id, first, outcome_of
from graphrunner.compiled import CompiledGraph
from graphrunner.engine import (
    ActionFailure,
    BranchOutcome,
    ChildOutcome,
    ForeachOutcome,
    ItemOutcome,
    ParallelOutcome,
    RunSnapshot,
    StepPlan,
)
from graphrunner.engine.snapshot import FINISHED
from graphrunner.engine.step import foreach_fails
from graphrunner.errors import CancelError, GraphrunnerError, RunNotFound
from graphrunner.model import ForeachNode, ParallelNode
from graphrunner.services.records import utcnow
from graphrunner.store import Store

if TYPE_CHECKING:
    from graphrunner.cluster.runs.context import Cluster

ENDED = {status.value for status in FINISHED}
CANCELLED = ChildOutcome(
    "cancelled", error={"type": "cancelled", "message": "cancelled: the node stopped waiting"}
)


@dataclass(frozen=True)
class Start:
    """How a kids step starts: its hook round, window, state size limit, and the kids of an
    earlier attempt of the step (`prior`) whose completed ones are kept."""

    hook_round: int
    window: int
    max_state_bytes: int | None
    prior: str = ""


def start(
    store: Store, graphs: GraphCache, graph: CompiledGraph, snap: RunSnapshot, plan: StepPlan, how: Start
) -> Decision:
    """Suspend the step on its first kids (every branch; a foreach's first window of items).

    When the step ran before (a resume, an error hook's retry), a kid that completed then is
    kept and not run again; the others start afresh.
    """
    hook_round, window, max_state_bytes, prior = how.hook_round, how.window, how.max_state_bytes, how.prior
    error = engine.too_deep(graph, snap)
    if error is not None:
        return Complete(_all_failed(graph, plan, ChildOutcome("failed", error=error)), hook_round)
    base = _base(snap, plan.step)
    keys = list(keys_of(graph, plan))
    firsts = _firsts(graphs, graph, snap, plan, base, keys, max_state_bytes)
    kept = tuple(k for k, f in firsts.items() if prior and _same_kid(store, snap, f"{prior}.{k}", f))
    bad = tuple((keys.index(k), f) for k, f in firsts.items() if isinstance(f, str))
    wait = Wait("kids", hook_round=hook_round, child=base, total=len(keys), bad=bad, prior=prior, kept=kept)
    opened, upto = _refill(keys, wait, len(keys) if plan.kind == "parallel" else window)
    wait = wait.but(open=opened, upto=upto, failed=len(bad))
    if not opened or _gives_up(graph, plan, len(bad), len(keys)):
        return Complete(_outcome(graph, plan, wait, _loaded(store, snap, wait, keys)), hook_round)
    return Suspend(wait, changes={"children": (*snap.children, base)}, kids=tuple(opened))


def join(
    store: Store,
    graph: CompiledGraph,
    snap: RunSnapshot,
    plan: StepPlan,
    wait: Wait,
    window: int,
    woken_by: str = "",
) -> Decision:
    """A kid has woken its parent: start more, or complete the node once every kid is done.

    A wake-up that names its kid (`woken_by`) looks at that kid alone, so N kids cost N loads;
    one that does not (the sweeper's, a lost race's) reads every open kid's status.
    """
    named = woken_by.removeprefix(wait.child + ".") if woken_by.startswith(wait.child + ".") else None
    candidates = ([named] if named in wait.open else []) if named is not None else _finished(store, wait)
    ends = {key: _end(store, snap, f"{wait.child}.{key}") for key in candidates}
    done = {k: e for k, e in ends.items() if e is not None}
    if not done:
        return Idle()  # a stray or repeated wake-up: the open kids wake the parent again
    still = tuple(k for k in wait.open if k not in done)
    failed = wait.failed + sum(not e.ok for e in done.values())
    keys = list(keys_of(graph, plan))
    if _gives_up(graph, plan, failed, wait.total):
        return Complete(_outcome(graph, plan, wait, _loaded(store, snap, wait, keys)), wait.hook_round)
    fresh, upto = _refill(keys, wait, window - len(still))
    if not still and not fresh:
        return Complete(_outcome(graph, plan, wait, _loaded(store, snap, wait, keys)), wait.hook_round)
    return Suspend(wait.but(open=(*still, *fresh), upto=upto, failed=failed), kids=fresh)


def keys_of(graph: CompiledGraph, plan: StepPlan) -> Iterator[str]:
    """The kids of the step: branch names in declaration order, or item indices."""
    if plan.kind == "parallel":
        yield from (b.name for b in plan.branches)
    else:
        yield from (str(i) for i in range(len(plan.items or ())))


def create(
    cluster: Cluster, graph: CompiledGraph, snap: RunSnapshot, wait: Wait, keys: Sequence[str]
) -> None:
    """Create the kid runs `keys` of the suspended step `snap` (a kid that exists is left as it is)."""
    plan = engine.prepare(graph, snap, utcnow())
    limit = cluster.settings.max_state_bytes
    for key in keys:
        with contextlib.suppress(GraphrunnerError):  # checked at start: it cannot fail here
            child, begun = _first(cluster.graphs, graph, snap, plan, wait.child, key, limit)
            cluster.create_run(begun, child, fingerprint(child, begun.inputs, begun.capabilities))


def cancel_open(cluster: Cluster, snap: RunSnapshot, reason: str) -> None:
    """Cancel the kids still running (a branch failed, or the foreach gave up)."""
    for run_id in open_kids(snap):
        with contextlib.suppress(RunNotFound, CancelError):
            cancel(cluster, run_id, reason=reason)


# -- helpers -------------------------------------------------------------------------------------------


def _finished(store: Store, wait: Wait) -> list[str]:
    """The open kids that have finished, read in one round trip (their status alone): only those
    are loaded, so a wake-up costs one read of the window and a load of what finished."""
    statuses = store.activity([f"{wait.child}.{key}" for key in wait.open])
    return [key for key, fields in zip(wait.open, statuses, strict=True) if fields.get("status") in ENDED]


def _same_kid(store: Store, snap: RunSnapshot, run_id: str, first: RunSnapshot | str) -> bool:
    """True when `run_id`, a kid of an earlier attempt of this step, completed and would run the
    same graph with the same inputs now: it is kept instead of run again."""
    kid = store.load_run(run_id)
    if kid is None or isinstance(first, str) or (kid.parent or {}).get("run_id") != snap.run_id:
        return False
    if (kid.graph_hash, kid.inputs) != (first.graph_hash, first.inputs):
        return False
    end = _end(store, snap, run_id)
    return end is not None and end.ok


def _base(snap: RunSnapshot, step: int) -> str:
    """The id prefix of this step's kids: `<run>.<step>`, made unique when the step ran before."""
    base = child_run_id(snap, step, snap.phase + 1)
    return base if base not in snap.children else f"{base}.r{len(snap.children)}"


def _first(
    graphs: GraphCache,
    graph: CompiledGraph,
    snap: RunSnapshot,
    plan: StepPlan,
    base: str,
    key: str,
    limit: int | None,
) -> tuple[CompiledGraph, RunSnapshot]:
    """The kid's graph and first snapshot, linked to the step of `snap` at its phase (the phase
    that waits for it); raises `GraphrunnerError`, or `ValueError` when its inputs fail."""
    if plan.kind == "parallel":
        branch = next(b for b in plan.branches if b.name == key)
        child_plan = StepPlan(
            plan.node, plan.step, "subgraph", child_graph=branch.graph, child_values=branch.values
        )
    else:
        assert plan.items is not None and plan.child_graph is not None
        index = int(key)
        values = engine.item_child(graph.nodes[plan.node], snap, index, plan.items[index], utcnow())
        if isinstance(values, ActionFailure):
            raise ValueError(values.message)
        child_plan = StepPlan(
            plan.node, plan.step, "subgraph", child_graph=plan.child_graph, child_values=values
        )
    return first(graphs, graph, snap, child_plan, f"{base}.{key}", snap.phase, limit)


def _firsts(
    graphs: GraphCache,
    graph: CompiledGraph,
    snap: RunSnapshot,
    plan: StepPlan,
    base: str,
    keys: list[str],
    limit: int | None,
) -> dict[str, RunSnapshot | str]:
    """Each kid's first snapshot, or why it cannot start (its inputs fail, its graph refuses them)."""
    firsts: dict[str, RunSnapshot | str] = {}
    for key in keys:
        try:
            firsts[key] = _first(graphs, graph, snap, plan, base, key, limit)[1]
        except (GraphrunnerError, ValueError) as exc:
            firsts[key] = str(exc)
    return firsts


def _end(store: Store, snap: RunSnapshot, run_id: str) -> ChildOutcome | None:
    """How kid `run_id` ended, or None while it runs (or is not created yet)."""
    kid = store.load_run(run_id)
    return None if kid is None else outcome_of(snap, kid)


def _loaded(store: Store, snap: RunSnapshot, wait: Wait, keys: list[str]) -> dict[str, ChildOutcome]:
    """Every started kid that has ended; one still running when the node gives up is left out
    (it is cancelled, and counts as neither a result nor a failure, as in-process)."""
    ends: dict[str, ChildOutcome] = {}
    bad = {i for i, _ in wait.bad}
    for position in range(wait.upto):
        key = keys[position]
        if position not in bad:
            base = wait.prior if key in wait.kept else wait.child
            end = _end(store, snap, f"{base}.{key}")
            if end is not None:
                ends[key] = end
    return ends


def _refill(keys: list[str], wait: Wait, room: int) -> tuple[tuple[str, ...], int]:
    """The next kids to start from position `wait.upto` on (neither unstartable nor kept), to fill
    `room` places, and the new `upto`: just past the last of them while kids are left to start,
    else every key. One pass over the keys."""
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


def _gives_up(graph: CompiledGraph, plan: StepPlan, failed: int, total: int) -> bool:
    spec = graph.nodes[plan.node].spec
    if isinstance(spec, ParallelNode):
        return failed > 0 and spec.error_policy == "fail_fast"
    assert isinstance(spec, ForeachNode)
    return foreach_fails(graph, spec, failed, total)


def _all_failed(graph: CompiledGraph, plan: StepPlan, end: ChildOutcome) -> ParallelOutcome | ForeachOutcome:
    keys = list(keys_of(graph, plan))
    return _outcome(graph, plan, Wait("kids", total=len(keys), upto=len(keys)), dict.fromkeys(keys, end))


def _outcome(
    graph: CompiledGraph, plan: StepPlan, wait: Wait, ends: dict[str, ChildOutcome]
) -> ParallelOutcome | ForeachOutcome:
    """The node's outcome from the kids' ends (and the items that could not start)."""
    bad = dict(wait.bad)
    if plan.kind == "parallel":
        names = [b.name for b in plan.branches]
        branches = []
        for position, name in enumerate(names):
            end = ends.get(name)
            if position in bad:
                end = ChildOutcome("failed", error={"type": "node_exception", "message": bad[position]})
            branches.append(BranchOutcome(name, end or CANCELLED))
        failed_first = next(
            (b.name for b in branches if not b.child.ok and b.child.status != "cancelled"), None
        )
        return ParallelOutcome(tuple(branches), failed_first)
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
