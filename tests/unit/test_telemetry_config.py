"""Tracing's configuration and propagation: what OTEL_* asks for, the TraceLink a run keeps,
the span ids every task derives alike."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider

from graphrunner.engine import ParentLink, TraceLink
from graphrunner.errors import ConfigurationError
from graphrunner.telemetry import ids, propagation, sdk

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_nothing_is_wanted_when_no_otel_variable_is_set() -> None:
    assert sdk.wanted({}) == sdk.Wanted()
    assert sdk.wanted({"OTEL_SERVICE_NAME": "x"}) == sdk.Wanted()


def test_an_endpoint_or_an_exporter_turns_a_signal_on() -> None:
    assert sdk.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}) == sdk.Wanted(
        ("otlp",), ("otlp",)
    )
    only_traces = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}
    assert sdk.wanted(only_traces) == sdk.Wanted(("otlp",), ())
    assert sdk.wanted({"OTEL_TRACES_EXPORTER": "console,otlp"}).traces == ("console", "otlp")
    off = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}
    assert sdk.wanted(off) == sdk.Wanted((), ("otlp",))
    disabled = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}
    assert sdk.wanted(disabled) == sdk.Wanted()


def test_an_unknown_exporter_or_protocol_is_named() -> None:
    with pytest.raises(ConfigurationError, match=r"OTEL_TRACES_EXPORTER='zipkin'.*otlp, console, none"):
        sdk.wanted({"OTEL_TRACES_EXPORTER": "zipkin"})
    with pytest.raises(ConfigurationError, match=r"OTEL_EXPORTER_OTLP_PROTOCOL='http/json'"):
        sdk.protocol({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "TRACES")
    assert sdk.protocol({"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc"}, "METRICS") == "grpc"
    assert sdk.protocol({}, "TRACES") == "http/protobuf"


def test_a_run_hangs_under_a_given_traceparent() -> None:
    link = propagation.at_submit("r1", PARENT)
    assert (link.trace_id, link.parent, link.sampled) == (
        "0af7651916cd43dd8448eb211c80319c",
        "b7ad6b7169203331",
        True,
    )
    assert link.correlation == "r1" and link.segment == 0 and link.since > 0


@pytest.mark.parametrize(
    "bad",
    [
        "garbage",
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",  # an all-zero trace id is invalid
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01; rm -rf /",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
    ],
)
def test_an_invalid_traceparent_is_not_taken(bad: str) -> None:
    assert not propagation.valid_traceparent(bad)
    link = propagation.at_submit("r1", bad)
    assert link.parent is None and link.sampled is None and len(link.trace_id) == 32


def test_a_run_submitted_inside_a_span_hangs_under_it() -> None:
    tracer = TracerProvider().get_tracer("a producer")
    with tracer.start_as_current_span("POST /orders") as span:
        link = propagation.at_submit("r1")
    context = span.get_span_context()
    assert (link.trace_id, link.parent) == (format(context.trace_id, "032x"), format(context.span_id, "016x"))


def test_a_child_run_hangs_under_its_parents_wait_span() -> None:
    parent = TraceLink(
        trace_id="ab" * 16, parent="cd" * 8, sampled=True, correlation="root", namespace=("outer",)
    )
    link = ParentLink(run_id="root", step=3, phase=2, node="fan")
    child = propagation.of_child(parent, link, index=4)
    assert child is not None
    assert child.parent == ids.wait_span(parent, "root", 3, 2)
    assert (child.trace_id, child.sampled, child.correlation) == (parent.trace_id, True, "root")
    assert (child.namespace, child.index, child.branch) == (("outer", "fan"), 4, None)
    assert propagation.of_child(None, link) is None


def test_a_resume_opens_a_new_run_span_in_the_same_trace() -> None:
    link = TraceLink(trace_id="ab" * 16, since=1)
    again = propagation.resumed(link)
    assert again is not None and again.trace_id == link.trace_id and again.segment == 1 and again.since > 1
    assert ids.run_span(again, "r") != ids.run_span(link, "r")


def test_derived_span_ids_are_stable_and_never_zero() -> None:
    link = TraceLink(trace_id="ab" * 16)
    assert ids.wait_span(link, "r", 1, 2) == ids.wait_span(link, "r", 1, 2) != ids.wait_span(link, "r", 1, 3)
    assert all(len(ids.derived(i)) == 16 and int(ids.derived(i), 16) != 0 for i in range(1000))


def test_a_forced_id_is_taken_by_the_span_started_in_its_context() -> None:
    provider = TracerProvider(id_generator=sdk.forced_ids_class()())
    tracer = provider.get_tracer("t")
    with ids.forcing("ab" * 16, "cd" * 8):
        forced = tracer.start_span("forced")
    free = tracer.start_span("free")
    assert (
        format(forced.get_span_context().trace_id, "032x"),
        format(forced.get_span_context().span_id, "016x"),
    ) == ("ab" * 16, "cd" * 8)
    assert format(free.get_span_context().span_id, "016x") != "cd" * 8
