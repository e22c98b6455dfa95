"""Spans of runs on the session's in-thread worker, through a tracer provider of the test's own:
durable waits as suspension spans, failures as ERROR, a paused and resumed run as two run spans
of one trace, and no span at all when no provider was set up."""

from __future__ import annotations

import textwrap
import uuid
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from support import wait_for

from graphrunner import parse_graph
from graphrunner.client import Client
from graphrunner.telemetry import sdk

WAIT_S = 60


@pytest.fixture
def exported() -> Iterator[InMemorySpanExporter]:
    """Spans of graphrunner's, through a provider of this test's own (not the global one)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(id_generator=sdk.forced_ids_class()())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sdk.install(provider)
    try:
        yield exporter
    finally:
        sdk.uninstall(provider)
        provider.shutdown()


def _trace_of(exporter: InMemorySpanExporter, run_id: str) -> list[ReadableSpan]:
    spans = list(exporter.get_finished_spans())
    root = next(s for s in spans if (s.attributes or {}).get("openarmature.invocation_id") == run_id)
    assert root.context is not None
    return [s for s in spans if s.context is not None and s.context.trace_id == root.context.trace_id]


def _graph(body: str) -> str:
    return textwrap.dedent(f"id: t/traced-{uuid.uuid4().hex[:6]}\n") + textwrap.dedent(body)


def test_a_durable_retry_backoff_is_a_suspension_span_between_two_attempts(
    cluster: Client, exported: InMemorySpanExporter
) -> None:
    graph = parse_graph(_graph("""
        config: {start: flaky}
        nodes:
          flaky:
            action: {tool: fail, params: {message: down, transient: true}}
            retry: [{max_attempts: 2, initial: 1.2, jitter: 0}]
    """))  # fmt: skip
    handle = cluster.submit(graph)
    result = handle.wait(timeout=WAIT_S)
    assert result.status == "failed"
    wait_for(
        lambda: any(s.name == "openarmature.invocation" for s in exported.get_finished_spans()),
        WAIT_S,
        "the run span",
    )
    spans = _trace_of(exported, handle.id)
    attempts = sorted((s for s in spans if s.name == "flaky"), key=lambda s: s.start_time or 0)
    [suspension] = [s for s in spans if s.name == "graphrunner.wait"]
    assert [s.attributes["openarmature.node.attempt_index"] for s in attempts] == [0, 1]
    assert attempts[0].end_time <= suspension.end_time <= attempts[1].start_time  # type: ignore[operator]
    assert suspension.attributes["openarmature.suspension.metadata.kind"] == "retry"
    assert suspension.attributes["openarmature.outcome"] == "suspended"
    last = attempts[1]
    assert last.status.status_code.name == "ERROR"
    assert last.attributes["openarmature.error.category"] == result.error.type
    assert [e.name for e in last.events] == ["exception"]
    [root] = [s for s in spans if s.name == "openarmature.invocation"]
    assert root.status.status_code.name == "ERROR" and root.parent is None


def test_a_resumed_run_opens_a_second_run_span_in_the_same_trace(
    cluster: Client, exported: InMemorySpanExporter
) -> None:
    graph = parse_graph(_graph("""
        config: {start: ask}
        nodes:
          ask: {type: pause, message: "approve it", next: done}
          done: {type: return, output: ok}
    """))  # fmt: skip
    handle = cluster.submit(graph)
    assert handle.wait(timeout=WAIT_S).status == "paused"
    cluster.resume(handle.id)
    assert handle.wait(timeout=WAIT_S).status == "completed"

    def both() -> bool:
        return sum(s.name == "openarmature.invocation" for s in exported.get_finished_spans()) == 2

    wait_for(both, WAIT_S, "two run spans")
    spans = _trace_of(exported, handle.id)
    runs = sorted((s for s in spans if s.name == "openarmature.invocation"), key=lambda s: s.start_time or 0)
    assert [r.attributes["graphrunner.run.segment"] for r in runs] == [0, 1]
    assert runs[0].attributes["openarmature.outcome"] == "suspended"
    assert runs[1].attributes["graphrunner.run.status"] == "completed"
    [done] = [s for s in spans if s.name == "done"]
    assert done.parent is not None and done.parent.span_id == runs[1].context.span_id  # type: ignore[union-attr]


def test_without_a_provider_set_up_a_run_emits_no_span(cluster: Client) -> None:
    exporter = InMemorySpanExporter()
    unused = TracerProvider()  # not installed: graphrunner must not find it
    unused.add_span_processor(SimpleSpanProcessor(exporter))
    graph = parse_graph(_graph("""
        config: {start: a}
        nodes:
          a: {action: {tool: echo, params: {x: 1}}, next: b}
          b: {type: return, output: done}
    """))  # fmt: skip
    assert cluster.submit(graph).wait(timeout=WAIT_S).status == "completed"
    assert not sdk.wanted().traces  # the suite sets no OTEL_*
    assert exporter.get_finished_spans() == ()


def test_a_cancelled_run_ends_its_wait_and_its_run_span(
    cluster: Client, exported: InMemorySpanExporter
) -> None:
    graph = parse_graph(
        _graph("""
        config: {start: nap}
        nodes:
          nap: {action: {tool: sleep, params: {seconds: 600}}}
    """)
    )
    handle = cluster.submit(graph)
    wait_for(lambda: cluster.store.load_run(handle.id).wait is not None, WAIT_S, "the durable sleep")
    cluster.cancel(handle.id)
    spans = _trace_of(exported, handle.id)
    [root] = [s for s in spans if s.name == "openarmature.invocation"]
    assert root.attributes["openarmature.outcome"] == "cancelled"
    assert root.status.status_code.name == "UNSET"
    [nap] = [s for s in spans if s.name == "graphrunner.wait"]
    assert nap.attributes["openarmature.suspension.metadata.kind"] == "timer"
    assert nap.parent is not None and nap.parent.span_id == root.context.span_id


def test_a_failed_foreach_item_is_an_error_span_under_the_fan_out_span(
    cluster: Client, exported: InMemorySpanExporter
) -> None:
    graph = parse_graph(
        _graph("""
        state: {xs: {type: list, default: [ok, bad, ok]}}
        config: {start: fan, error_mode: continue}
        nodes:
          fan:
            type: foreach
            over: "${state.xs}"
            as: x
            parallel: true
            tolerated_failures: 1
            action: {tool: fail, params: {message: "item ${x}"}}
    """)
    )
    handle = cluster.submit(graph)
    handle.wait(timeout=WAIT_S)
    wait_for(
        lambda: any(s.name == "openarmature.invocation" for s in exported.get_finished_spans()),
        WAIT_S,
        "the run span",
    )
    spans = _trace_of(exported, handle.id)
    [fan_out] = [s for s in spans if (s.attributes or {}).get("graphrunner.wait.kind") == "foreach"]
    items = [s for s in spans if s.parent is not None and s.parent.span_id == fan_out.context.span_id]
    assert len(items) == 3
    assert {s.status.status_code.name for s in items} == {"ERROR"}
    assert all(s.attributes["openarmature.correlation_id"] == handle.id for s in items)
    assert all([e.name for e in s.events] == ["exception"] for s in items)
