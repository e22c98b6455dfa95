"""The spans a worker emits for a run, all in the run's one trace (DESIGN §11, OA observability §4-5).

- a **step span** per task that takes a step, named after its node, live while the task runs
  (the action's own spans and the task's log lines hang under it), under the run span;
- a **wait span** per suspension of a step (a retry backoff, a durable sleep, a foreach's items,
  child runs), from the commit that suspended the step to the task that takes it up again:
  a foreach's items and a child run's spans hang under it, so it is the fan-out span, the
  subgraph span, the parallel node's span of OA §4;
- an **item span** per foreach item, under its step's wait span;
- a **run span** per run (per segment: a resume opens another), from submit (or resume) to its
  end or pause, under the producer's span, or a child run's under its parent's wait span;
- a **repair span** when the sweeper sends a stalled run's work again.

A span that ends in another task than the one its children start in (run and wait spans) is
emitted when it ends, with the id every task derives for it (`ids`). Without a tracer
provider set up by `graphrunner.telemetry.sdk` nothing here starts a span: the step context
still times the step for the metrics and carries the ids for the log lines.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, Status, StatusCode, TraceFlags

from graphrunner.engine import ActionFailure, RunFailure, RunSnapshot, RunStatus, TraceLink
from graphrunner.telemetry import ids, logs, metrics, sdk
from graphrunner.telemetry.naming import (
    item_attributes,
    run_attributes,
    run_name,
    version,
    wait_attributes,
    wait_name,
)

if TYPE_CHECKING:
    from graphrunner.compiled import CompiledGraph

SCOPE = "graphrunner"
INVOCATION = "openarmature.invocation"
AttributeMap = Mapping[str, Any]


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def enabled() -> bool:
    """True when a tracer provider graphrunner set up takes our spans."""
    return ids.honoured()


_cached: tuple[Any, trace.Tracer] | None = None  # (provider, its tracer): `get_tracer` takes a lock
_roots: dict[str, bool] = {}  # the sampler's decisions on recent root traces
ROOTS_KEPT = 1024


def _tracer() -> trace.Tracer:
    global _cached
    provider = sdk.tracer_provider()
    if _cached is None or _cached[0] is not provider:
        _cached = (provider, provider.get_tracer(SCOPE, version()))
    return _cached[1]


def _sampled(link: TraceLink) -> bool:
    """Whether the run's trace is sampled: its parent's say, else the sampler's for a root (which
    depends on the trace id alone: every worker decides alike)."""
    if link.sampled is not None:
        return link.sampled
    known = _roots.get(link.trace_id)
    if known is not None:
        return known
    sampler = getattr(sdk.tracer_provider(), "sampler", None)
    decided = (
        True
        if sampler is None
        else bool(sampler.should_sample(None, int(link.trace_id, 16), INVOCATION).decision.is_sampled())
    )
    if len(_roots) >= ROOTS_KEPT:
        _roots.clear()
    _roots[link.trace_id] = decided
    return decided


def _context(link: TraceLink, span_id: str | None) -> Context:
    """A context whose current span is the remote span `span_id` of the run's trace."""
    if span_id is None:
        return Context()
    flags = TraceFlags(TraceFlags.SAMPLED if _sampled(link) else TraceFlags.DEFAULT)
    parent = SpanContext(int(link.trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=flags)
    return trace.set_span_in_context(NonRecordingSpan(parent))


def under_run(link: TraceLink, run_id: str) -> Context:
    """The context of spans under the run span of `run_id`."""
    return _context(link, ids.run_span(link, run_id))


def _emit(link: TraceLink, span_id: str, parent: Context, name: str, start: float, end: float,
          attributes: AttributeMap, failure: RunFailure | None = None) -> None:  # fmt: skip
    """Emit a span that ended at `end` (epoch s) with the id `span_id` every task derives."""
    with ids.forcing(link.trace_id, span_id):
        span = _tracer().start_span(name, context=parent, start_time=_ns(start), attributes=attributes)
    if failure is not None:
        failed(span, failure)
    elif attributes.get("openarmature.outcome") != "cancelled":
        span.set_status(Status(StatusCode.OK))
    span.end(end_time=_ns(max(start, end)))


def failed(span: Span, failure: RunFailure) -> None:
    """Mark `span` failed (OA §4.2): ERROR with the category, an exception event, the category
    attribute."""
    span.set_attribute("openarmature.error.category", failure.type)
    span.set_status(Status(StatusCode.ERROR, failure.type))
    event = {"exception.type": failure.error_type or failure.type, "exception.message": failure.message}
    if failure.traceback:
        event["exception.stacktrace"] = failure.traceback
    span.add_event("exception", event)


# -- the run span ---------------------------------------------------------------------------------


def run_ended(graph: CompiledGraph | None, snap: RunSnapshot) -> None:
    """The run (segment) of `snap` ended (finished or paused): count it, emit its run span."""
    metrics.run_finished(snap.graph_id, snap.status.value)
    link = snap.trace
    if link is None or not enabled():
        return
    parent = _context(link, link.parent) if link.parent else Context()
    error = snap.error if snap.status is RunStatus.FAILED else None
    attributes = run_attributes(graph, snap, link)
    _emit(link, ids.run_span(link, snap.run_id), parent, run_name(snap, link), link.since / 1000,
          time.time(), attributes, error)  # fmt: skip


def cancelled(snap: RunSnapshot, final: RunSnapshot) -> None:
    """Run `snap` was cancelled (`final`): the wait it kept and its run span end now. Only where
    this process traces (a worker, `graphrunner ui`, `graphrunner cancel`): a producer's own
    process emits nothing."""
    if snap.status is RunStatus.RUNNING and snap.wait is not None:
        wait_ended(None, snap, time.time())
    if snap.status is RunStatus.PAUSED:  # its run span ended when it paused
        metrics.run_finished(final.graph_id, final.status.value)
    else:
        run_ended(None, final)


# -- the wait span ---------------------------------------------------------------------------------


def wait_ended(graph: CompiledGraph | None, snap: RunSnapshot, until: float) -> None:
    """The wait `snap` kept (at its phase) ended at `until` (epoch s): emit its span."""
    link, wait = snap.trace, snap.wait
    if link is None or wait is None or wait.since is None or not enabled():
        return
    span_id = ids.wait_span(link, snap.run_id, snap.step, snap.phase)
    attributes = wait_attributes(graph, snap, wait, link)
    name = wait_name(snap, wait)
    _emit(link, span_id, under_run(link, snap.run_id), name, wait.since, until, attributes)


# -- the step span --------------------------------------------------------------------------------


@dataclass
class StepTrace:
    """One task's part in a step: the snapshot it loaded, when it began, its live span."""

    graph: CompiledGraph
    loaded: RunSnapshot
    began: float = field(default_factory=time.time)
    span: Span | None = None
    queue_ms: float | None = None
    tool: str | None = None
    status: str | None = None  # what the step's completion was (ok, error, end, paused)
    failure: RunFailure | None = None

    def committed(self, before: RunSnapshot, after: RunSnapshot) -> None:
        """A commit of this task moved the run from `before` to `after`: the wait the task took
        up is over, and a run that finished or paused ends its run span."""
        if before is self.loaded and before.wait is not None:
            wait_ended(self.graph, before, self.began)
        if after.status.finished or after.status is RunStatus.PAUSED:
            run_ended(self.graph, after)

    def ended(self, outcome: str, failure: RunFailure | None = None) -> None:
        """The task is done with the step: `outcome` (ok, error, end, paused, suspended, ...)."""
        node = self.loaded.node or ""
        metrics.step_done(self.loaded.graph_id, node, outcome, time.time() - self.began)
        if self.span is None:
            return
        self.span.set_attribute("graphrunner.outcome", outcome)
        if self.tool:
            self.span.set_attribute("graphrunner.tool", self.tool)
        if failure is not None:
            failed(self.span, failure)
        else:
            if outcome in ("suspended", "paused"):
                self.span.set_attribute("openarmature.outcome", "suspended")
            self.span.set_status(Status(StatusCode.OK))


_current: ContextVar[StepTrace | None] = ContextVar("graphrunner_step_trace", default=None)


def current() -> StepTrace | None:
    """The `StepTrace` of the task running in this context, if any."""
    return _current.get()


class step:  # a function in use: `with spans.step(...) as taken`
    """A task takes up the step at `snap` (its message sent at `sent`, epoch s, to `queue`): time
    it, name its log lines, and trace it under the run span while it runs. A class, not a
    generator: entered once per step, traced or not, it must cost next to nothing when off."""

    __slots__ = ("logged", "taken", "tokens", "using", "worker")

    def __init__(self, graph: CompiledGraph, snap: RunSnapshot, worker: str, sent: float | None = None,
                 queue: str | None = None) -> None:  # fmt: skip
        self.taken = StepTrace(graph, snap)
        self.worker = worker
        self.logged = logs.step_context(snap.run_id, snap.step + 1, snap.node)
        self.using: AbstractContextManager[Span] | None = None
        if sent is not None:
            after = max(sent, snap.wait.due or 0.0) if snap.wait is not None else sent
            self.taken.queue_ms = max(0.0, (self.taken.began - after) * 1000)
            metrics.step_queued(snap.graph_id, snap.node or "", queue or "", self.taken.queue_ms / 1000)

    def __enter__(self) -> StepTrace:
        taken, snap = self.taken, self.taken.loaded
        self.tokens = _current.set(taken)
        self.logged.__enter__()
        if snap.trace is not None and enabled():
            attributes = step_attributes(snap, snap.trace, self.worker, taken.queue_ms)
            context = under_run(snap.trace, snap.run_id)
            taken.span = _tracer().start_span(snap.node or "step", context=context, attributes=attributes)
            self.using = trace.use_span(taken.span, end_on_exit=True, record_exception=True,
                                        set_status_on_exception=True)  # fmt: skip
            self.using.__enter__()
        return taken

    def __exit__(self, *exc: Any) -> None:
        try:
            if self.using is not None:
                self.using.__exit__(*exc)
        finally:
            self.logged.__exit__(*exc)
            _current.reset(self.tokens)


def step_attributes(
    snap: RunSnapshot, link: TraceLink, worker: str, queue_ms: float | None
) -> dict[str, Any]:
    """A step span's attributes (OA §5.2, and graphrunner's own)."""
    node = snap.node or ""
    attributes: dict[str, Any] = {
        "openarmature.node.name": node,
        "openarmature.node.namespace": [*link.namespace, node],
        "openarmature.node.step": snap.step,
        "openarmature.node.attempt_index": getattr(snap.wait, "attempt", 1) - 1 if snap.wait else 0,
        "graphrunner.run.id": snap.run_id,
        "graphrunner.graph.id": snap.graph_id,
        "graphrunner.step": snap.step + 1,
        "graphrunner.phase": snap.phase,
        "graphrunner.worker": worker,
    }
    if link.correlation:
        attributes["openarmature.correlation_id"] = link.correlation
    if link.branch is not None:
        attributes["openarmature.node.branch_name"] = link.branch
    if link.index is not None:
        attributes["openarmature.node.fan_out_index"] = link.index
    if queue_ms is not None:
        attributes["graphrunner.queue_wait_ms"] = round(queue_ms, 3)
    return attributes


# -- items and repairs ------------------------------------------------------------------------------


def item_parent(snap: RunSnapshot) -> dict[str, str]:
    """What the item messages of the foreach suspended at `snap` carry of its trace: the W3C
    traceparent of its wait span (their spans' parent) and the correlation id (none untraced)."""
    link = snap.trace
    if link is None or not enabled():
        return {}
    span_id = ids.wait_span(link, snap.run_id, snap.step, snap.phase)
    parent = f"00-{link.trace_id}-{span_id}-{'01' if _sampled(link) else '00'}"
    return {"trace": parent, **({"correlation": link.correlation} if link.correlation else {})}


class ItemWork(Protocol):
    """What an item task knows of its item (an item message)."""

    @property
    def run_id(self) -> str: ...
    @property
    def step(self) -> int: ...
    @property
    def index(self) -> int: ...
    @property
    def trace(self) -> str | None: ...
    @property
    def correlation(self) -> str | None: ...


@dataclass
class ItemSpan:
    """An item's live span, if it is traced."""

    span: Span | None = None

    def ended(self, failure: ActionFailure | None) -> None:
        """The item ended: OK, or ERROR with `failure`'s classification (OA §4.2)."""
        if self.span is None:
            return
        if failure is None:
            self.span.set_status(Status(StatusCode.OK))
            return
        failed(self.span, failure.to_run_failure())


@contextlib.contextmanager
def item(work: ItemWork, node: str, worker: str) -> Iterator[ItemSpan]:
    """A task runs foreach item `work.index`: its log lines name it, and its span, under the
    message's traceparent (the step's wait span: the fan-out span) when it has one, lasts while
    it runs."""
    with logs.item_context(work.run_id, work.step, node, work.index):
        if work.trace is None or not enabled():
            yield ItemSpan()
            return
        with _item_span(work, node, worker) as span:
            yield ItemSpan(span)


@contextlib.contextmanager
def _item_span(work: ItemWork, node: str, worker: str) -> Iterator[Span]:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    parent = TraceContextTextMapPropagator().extract({"traceparent": work.trace or ""})
    attributes = item_attributes(work.run_id, work.step, node, work.index, worker, work.correlation)
    span = _tracer().start_span(node, context=parent, attributes=attributes)
    with trace.use_span(span, end_on_exit=True, record_exception=True, set_status_on_exception=True):
        yield span


def repaired(snap: RunSnapshot, what: str) -> None:
    """The sweeper sent the work of stalled run `snap` again (`what`): a span under its run span."""
    link = snap.trace
    if link is None or not enabled():
        return
    attributes: dict[str, Any] = {
        "graphrunner.run.id": snap.run_id,
        "graphrunner.step": snap.step + 1,
        "graphrunner.repair": what,
    }
    _tracer().start_span(
        "graphrunner.repair", context=under_run(link, snap.run_id), attributes=attributes
    ).end()
