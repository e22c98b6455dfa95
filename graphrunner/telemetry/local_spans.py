"""The spans of a run taken in this process by the in-process runner (OA observability §4-5).

graphrunner is a library in the caller's process here: its spans go through the OpenTelemetry
API's global tracer, live, and it never sets a tracer provider up (without an SDK the API's
spans are no-ops). Names and attributes are the cluster's (`naming`, `spans.step_attributes`);
the tree is OA's, with one span per step instead of one per task:

- a **run span** per run: `openarmature.invocation`, under the caller's current span; a child
  run's is named after its place in the parent (the subgraph or foreach node, or the branch);
- a **step span** per step, named after its node and current while the step runs: the action's
  own spans and log lines, a foreach's item spans and the child runs of a subgraph, a parallel
  node or a foreach over a graph hang under it, and it carries the fan-out (§5.4), parallel
  (§5.7) or subgraph (§5.3) attributes that the cluster puts on the span of its wait;
- an **item span** per item of a foreach over an action, named after the node.

Retries made within a step (an action's retry policy, an error hook's `retry`) stay in its span:
a `graphrunner.retry` event per failed attempt and `graphrunner.attempts`, the attempts made
(a cluster step whose backoff is durable has a span per attempt, with a suspension between).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from graphrunner.engine import ParentLink, RunFailure, RunSnapshot, RunStatus, TraceLink
from graphrunner.telemetry import logs, propagation
from graphrunner.telemetry.naming import holding, item_attributes, run_attributes, run_name, version
from graphrunner.telemetry.spans import SCOPE, ItemSpan, failed, step_attributes

if TYPE_CHECKING:
    from graphrunner.compiled import CompiledGraph
    from graphrunner.engine import StepPlan, StepResult
    from graphrunner.services.records import AnyRecord

WORKER = "local"


@dataclass(frozen=True)
class Place:
    """Where a child run starts: its parent run's link, the parent's step, its branch or item."""

    link: TraceLink
    parent: ParentLink
    branch: str | None = None
    index: int | None = None


_run: ContextVar[TraceLink | None] = ContextVar("graphrunner_local_run", default=None)
_place: ContextVar[Place | None] = ContextVar("graphrunner_local_place", default=None)


@functools.cache
def _tracer() -> trace.Tracer:
    """The global tracer (a proxy until the application sets a provider up, then its tracer)."""
    return trace.get_tracer(SCOPE, version())


def _start(name: str, attributes: Callable[[], dict[str, Any]]) -> Span:
    """A span `name` under the current one; its attributes are only worked out when it records
    (without an SDK, a step costs no more than a no-op span)."""
    span = _tracer().start_span(name)
    if span.is_recording():
        span.set_attributes(attributes())
    return span


@contextlib.contextmanager
def _current(span: Span) -> Iterator[None]:
    """`span` is current in the block and ends with it: an exception escaping the block fails it
    (its category when it has one), a cancellation leaves it unset (`openarmature.outcome`)."""
    with trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
        try:
            yield
        except asyncio.CancelledError:
            span.set_attribute("openarmature.outcome", "cancelled")
            raise
        except Exception as exc:
            category = getattr(exc, "category", "node_exception")
            failed(span, RunFailure(type=category, message=str(exc), error_type=type(exc).__name__))
            raise


# -- the run span ---------------------------------------------------------------------------------


@dataclass
class RunSpan:
    """The span of a run taken in this process."""

    span: Span
    graph: CompiledGraph
    link: TraceLink
    parent: ParentLink | None

    def ended(self, snap: RunSnapshot) -> None:
        """The run ended (finished or paused) at `snap`: its attributes and status (OA §4.2)."""
        if not self.span.is_recording():
            return
        placed = snap if self.parent is None else snap.model_copy(update={"parent": self.parent})
        self.span.set_attributes(run_attributes(self.graph, placed, self.link))
        if snap.status is RunStatus.FAILED:
            failed(self.span, snap.error or RunFailure(type="node_exception"))
        elif snap.status is not RunStatus.CANCELLED:
            self.span.set_status(Status(StatusCode.OK))


@contextlib.contextmanager
def run(graph: CompiledGraph, snap: RunSnapshot) -> Iterator[RunSpan]:
    """The run `snap` begins: its span, current until the block ends, under the current span."""
    place = _place.get()
    if place is None:
        link, parent = propagation.at_submit(snap.run_id), None
    else:
        child = propagation.of_child(place.link, place.parent, branch=place.branch, index=place.index)
        assert child is not None
        link, parent = child, place.parent
    placed = snap if parent is None else snap.model_copy(update={"parent": parent})
    span = _start(run_name(placed, link), lambda: run_attributes(graph, placed, link))
    run_token, place_token = _run.set(link), _place.set(None)
    try:
        with _current(span):
            yield RunSpan(span, graph, link, parent)
    finally:
        _place.reset(place_token)
        _run.reset(run_token)


@contextlib.contextmanager
def child(snap: RunSnapshot, *, branch: str | None = None, index: int | None = None) -> Iterator[None]:
    """The step at `snap` starts a child run in the block (a subgraph's, a branch, a foreach item)."""
    link = _run.get() or propagation.at_submit(snap.run_id)  # a single step has no run span
    parent = ParentLink(run_id=snap.run_id, step=snap.step, graph_id=snap.graph_id, node=snap.node)
    token = _place.set(Place(link, parent, branch, index))
    try:
        yield
    finally:
        _place.reset(token)


# -- the step span --------------------------------------------------------------------------------


@dataclass
class StepSpan:
    """The span of a step taken in this process."""

    span: Span
    graph: CompiledGraph

    def ended(self, plan: StepPlan, result: StepResult, records: Sequence[AnyRecord]) -> None:
        """The step is done: what it held (items, branches, a child run), its retried attempts
        (`records` before its own), its outcome and status (OA §4.2)."""
        if not self.span.is_recording():
            return
        event = result.event
        spec = self.graph.nodes[plan.node].spec if plan.node in self.graph.nodes else None
        total = len(plan.items) if plan.items is not None else len(plan.branches) or None
        self.span.set_attributes(holding(spec, total))
        self.span.set_attributes(
            {"graphrunner.outcome": event.status, "graphrunner.attempts": event.attempts}
        )
        if plan.call is not None:
            self.span.set_attribute("graphrunner.tool", plan.call.tool)
        for record in records[:-1]:
            error = getattr(record, "error", None)
            if error is not None:
                self.span.add_event("graphrunner.retry", _retried(record, error))
        if event.error is not None:
            failed(self.span, event.error)
            return
        if event.status == "paused":
            self.span.set_attribute("openarmature.outcome", "suspended")
        self.span.set_status(Status(StatusCode.OK))


def _retried(record: Any, error: RunFailure) -> dict[str, Any]:
    return {
        "openarmature.node.attempt_index": record.attempts - 1,
        "openarmature.error.category": error.type,
        "exception.message": error.message,
        "graphrunner.retry_in_s": record.retry_in_s,
    }


@contextlib.contextmanager
def step(graph: CompiledGraph, snap: RunSnapshot) -> Iterator[StepSpan]:
    """The step at `snap` is taken in the block: its span, current, under the run's."""
    link = _run.get() or propagation.at_submit(snap.run_id)
    span = _start(snap.node or "step", lambda: step_attributes(snap, link, WORKER, None))
    with _current(span), logs.step_context(snap.run_id, snap.step + 1, snap.node):
        yield StepSpan(span, graph)


# -- foreach items --------------------------------------------------------------------------------


@contextlib.contextmanager
def item(snap: RunSnapshot, node: str, index: int) -> Iterator[ItemSpan]:
    """Item `index` of the foreach at `snap` runs in the block: its span, under the step's."""
    link = _run.get()
    correlation = link.correlation if link is not None else None
    span = _start(node, lambda: item_attributes(snap.run_id, snap.step + 1, node, index, WORKER, correlation))
    with _current(span), logs.item_context(snap.run_id, snap.step + 1, node, index):
        yield ItemSpan(span)
