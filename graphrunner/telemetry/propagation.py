"""The producer's side of tracing: the `TraceLink` a new or resumed run keeps.

Only the OpenTelemetry API is used here: a producer's process keeps whatever tracer provider
its application set up (or none). A run submitted inside a span (a web request's) hangs its
run span under it; an explicit W3C `traceparent` (a header, the `TRACEPARENT` variable) is
taken instead when given. Otherwise the run starts a trace of its own, whether it is sampled
left to the workers' sampler.
"""

from __future__ import annotations

import re
import time

from opentelemetry import trace
from opentelemetry.trace import SpanContext
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from graphrunner.engine import ParentLink, TraceLink
from graphrunner.telemetry import ids

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
_W3C = TraceContextTextMapPropagator()


def valid_traceparent(value: str) -> bool:
    """True when `value` is a W3C `traceparent` naming a real trace and span."""
    return parent_of(value) is not None


def parent_of(traceparent: str, tracestate: str | None = None) -> SpanContext | None:
    """The span context a W3C `traceparent` (and `tracestate`) names, None when it is not one."""
    value = traceparent.strip().lower()
    if not _TRACEPARENT.match(value):
        return None
    carrier = {"traceparent": value, **({"tracestate": tracestate} if tracestate else {})}
    context = trace.get_current_span(_W3C.extract(carrier)).get_span_context()
    return context if context.is_valid else None


def at_submit(run_id: str, traceparent: str | None = None, tracestate: str | None = None) -> TraceLink:
    """The `TraceLink` of new run `run_id`: under `traceparent` when it is a valid one, else under
    the caller's current span when there is one, else in a trace of its own."""
    parent = parent_of(traceparent, tracestate) if traceparent else None
    if parent is None:
        current = trace.get_current_span().get_span_context()
        parent = current if current.is_valid else None
    now = int(time.time() * 1000)
    if parent is None:
        return TraceLink(trace_id=ids.new_trace_id(), since=now, correlation=run_id)
    state = parent.trace_state.to_header() if parent.trace_state else None
    return TraceLink(
        trace_id=format(parent.trace_id, "032x"),
        parent=format(parent.span_id, "016x"),
        sampled=parent.trace_flags.sampled,
        since=now,
        state=state or None,
        correlation=run_id,
    )


def of_child(
    parent: TraceLink | None, link: ParentLink, *, branch: str | None = None, index: int | None = None
) -> TraceLink | None:
    """The `TraceLink` of a child run started by the step `link` names: in its parent's trace,
    under the span of the wait that step keeps while the child runs."""
    if parent is None:
        return None
    return TraceLink(
        trace_id=parent.trace_id,
        parent=ids.wait_span(parent, link.run_id, link.step, link.phase),
        sampled=parent.sampled,
        since=int(time.time() * 1000),
        namespace=(*parent.namespace, link.node or ""),
        state=parent.state,
        correlation=parent.correlation,
        branch=branch,
        index=index,
    )


def resumed(link: TraceLink | None) -> TraceLink | None:
    """The `TraceLink` of a run resumed now: the same trace, a new run span."""
    if link is None:
        return None
    return link.model_copy(update={"segment": link.segment + 1, "since": int(time.time() * 1000)})
