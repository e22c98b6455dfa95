"""The protocol every kind of wait implements, and the registry that finds a kind from a plan or a
stored wait.

A step that cannot finish in one task (a long retry backoff, a durable sleep, the items of a
foreach, child runs, a hook asking to run it again) commits a `Wait` and bumps the run's
`phase`; the task that goes on with it carries that phase, so every commit of the step stays
fenced. Each kind of wait is one module of this package: its `Wait` models (one per stored
`kind`, `graphrunner.engine.waiting`) and one `WaitKind`, whose methods say everything the
executor and the sweeper do with it. Defining a `WaitKind` subclass registers it; importing
`graphrunner.cluster.waits` imports every module, so every kind is known wherever a snapshot
is loaded. The executor and the sweeper never name a kind: they ask `fresh` (a step with no
wait) or `kind_of(wait)`.

The life of a wait, method by method (each a documented default below):

- `start`: a fresh step's plan starts on this kind (or None: not this kind's plan);
- `join`: go on with the suspended step (a timer came due, an item or a child came back);
- `sends`: what the suspending commit sends with it; `after_commit`: what is done after it;
- `after_step`: what follows a step taken on the wait that ended or lost a race;
- `takes_over`: whether a message of an earlier phase may take the step over;
- `repair`: what the sweeper sends again (when it looks is the wait model's `deadline`);
- `children`, `kept`: the child runs the wait holds open (cancel), and the id prefix of those
  an attempt of the step keeps (resume, an error hook's retry).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from graphrunner.cluster.steps.decisions import Complete, Decision, Suspend
from graphrunner.compiled import CompiledGraph
from graphrunner.engine import NoOutcome, RunSnapshot, StepPlan, UnknownWait, Wait

if TYPE_CHECKING:
    from graphrunner.cluster.runs.context import Cluster
    from graphrunner.cluster.runs.graphs import GraphCache
    from graphrunner.cluster.transport.messages import Outgoing
    from graphrunner.cluster.transport.publisher import Publisher
    from graphrunner.services import StepServices
    from graphrunner.store import Store

W = TypeVar("W", bound=Wait)


@dataclass(frozen=True)
class Context:
    """What every kind of wait works with on a worker: the cluster (store, graphs, publisher), the
    step services (a step's I/O), and how many foreach items or kids go out at once (`chunk`)."""

    cluster: Cluster
    services: StepServices
    chunk: int

    @property
    def store(self) -> Store:
        """The cluster's store."""
        return self.cluster.store

    @property
    def graphs(self) -> GraphCache:
        """The cluster's compiled graphs."""
        return self.cluster.graphs

    @property
    def publisher(self) -> Publisher:
        """The cluster's publisher."""
        return self.cluster.publisher


@dataclass(frozen=True)
class Step:
    """The step being taken: the run's graph, its snapshot, and the step's plan."""

    graph: CompiledGraph
    snap: RunSnapshot
    plan: StepPlan


class WaitKind(Generic[W]):
    """One kind of wait. Subclasses name the models they keep (`waits`) and the kinds of step plan
    they may start (`plans`: `action`, `foreach`, ...), and are registered."""

    waits: ClassVar[tuple[type[Wait], ...]] = ()
    plans: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.waits:
            kind = cls()
            for plan in cls.plans:
                BY_PLAN.setdefault(plan, []).append(kind)
            for model in cls.waits:
                BY_MODEL[model] = kind

    async def start(self, ctx: Context, step: Step, hook_round: int, prior: str) -> Decision | None:
        """How a fresh step starts when its plan is this kind's (`prior`: the id prefix of the child
        runs an earlier attempt of the step left); None when the plan is not this kind's."""
        return None

    async def join(self, ctx: Context, step: Step, wait: W, woken_by: str) -> Decision:
        """Go on with the step suspended on `wait` (`woken_by`: the child run that woke it)."""
        raise NotImplementedError

    def sends(self, cluster: Cluster, graph: CompiledGraph, snap: RunSnapshot, wait: W) -> list[Outgoing]:
        """What the commit that suspends `snap` on `wait` sends with it: the step again (at once, or
        as a durable timer when `wait` is due later)."""
        return [cluster.publisher.step(snap, graph, due=wait.due)]

    def after_commit(
        self, cluster: Cluster, graph: CompiledGraph, snap: RunSnapshot, suspend: Suspend
    ) -> None:
        """What is done once `snap` is committed suspended (nothing, unless the kind sends more)."""

    def after_step(self, ctx: Context, step: Step, wait: W, decision: Decision, done: str) -> None:
        """What follows a step taken on `wait` whose `decision` was applied (`done`: how it went)."""

    def takes_over(self, wait: W) -> bool:
        """Whether a message of an earlier phase may take over the step suspended on `wait`."""
        return False

    def repair(self, cluster: Cluster, snap: RunSnapshot, wait: W) -> str | None:
        """What the sweeper sends again for a stalled `snap` (the action), or None when nothing is
        missing: by default the step's message, when it was lost."""
        return resend_step(cluster, snap)

    def children(self, wait: W) -> list[str]:
        """The run ids of the child runs `wait` holds open (a cancel cancels them too)."""
        return []

    def kept(self, wait: W) -> str:
        """The id prefix of the child runs a new attempt of the step keeps when they completed."""
        return ""


BY_PLAN: dict[str, list[WaitKind[Any]]] = {}
BY_MODEL: dict[type[Wait], WaitKind[Any]] = {}


def kind_of(wait: Wait) -> WaitKind[Any]:
    """The kind that keeps `wait`; raises `UnknownWait`."""
    kind = BY_MODEL.get(type(wait))
    if kind is None:
        raise UnknownWait(f"no kind of wait of this worker handles a wait of kind {wait.kind!r}")
    return kind


async def fresh(ctx: Context, step: Step, hook_round: int = 0, prior: str = "") -> Decision:
    """How a step with no wait starts: the kind whose plan it is decides (the kinds that may start
    a plan of its kind are asked in turn); a plan of no kind (or a failed plan) completes at once."""
    if step.plan.failure is None:
        for kind in BY_PLAN.get(step.plan.kind, ()):
            decision = await kind.start(ctx, step, hook_round, prior)
            if decision is not None:
                return decision
    return Complete(NoOutcome(), hook_round)


def open_children(snap: RunSnapshot) -> list[str]:
    """The run ids of the child runs `snap` is waiting on (for cancel)."""
    return [] if snap.wait is None else kind_of(snap.wait).children(snap.wait)


def latest(snap: RunSnapshot) -> str:
    """The id prefix of the child runs of the step `snap` stopped at: what a resume or an error
    hook's retry of that step keeps (the child runs that completed)."""
    kept = "" if snap.wait is None else kind_of(snap.wait).kept(snap.wait)
    if kept:
        return kept
    if snap.error is not None and snap.error.node == snap.node and snap.children:
        return snap.children[-1]  # failed at it: its child runs were the last
    return ""


# -- what repairs send ---------------------------------------------------------------------------------


def resend_step(cluster: Cluster, snap: RunSnapshot) -> str | None:
    """The run's step message, when it was lost (or is stuck in the run's outbox)."""
    store, publisher = cluster.store, cluster.publisher
    if not store.direct and store.outbox(snap.run_id):
        publisher.flush(snap.run_id)
        return "published_outbox"
    sent = store.sent(snap.run_id)
    if sent is not None and store.timer_due(snap.run_id, sent.tag) is not None:
        return None  # a durable timer that has not come due (or no worker moves timers)
    broker = publisher.broker
    if sent is not None and (broker is None or not broker.lost(sent)):
        return None  # held by a worker (restored if it dies) or waiting on its queue
    graph = cluster.graphs.get(snap.graph_hash)
    publisher.send(snap.run_id, [publisher.step(snap, graph)])
    return "resent_step"


def wake(cluster: Cluster, snap: RunSnapshot) -> None:
    """Send the step of `snap` once more, untracked (a wake-up, a join that was lost)."""
    graph = cluster.graphs.get(snap.graph_hash)
    cluster.publisher.send(snap.run_id, [cluster.publisher.step(snap, graph, tracked=False)])


def queued(cluster: Cluster, queue: str | None = None) -> bool:
    """Messages wait on `queue` (wake-ups go to the default one); False when the broker cannot
    be looked at (RabbitMQ: what is missing is sent, and a duplicate changes nothing)."""
    broker, queue = cluster.publisher.broker, queue or cluster.settings.queue
    return broker is not None and broker.depths([queue])[queue] > 0
