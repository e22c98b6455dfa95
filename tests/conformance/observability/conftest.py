"""The tracer provider the observability fixtures read their spans from, for both modes.

The in-process runner emits through the OpenTelemetry API's global tracer, so the session's first
use of `exported` makes a provider of the suite's own the global one (the API allows it once per
process); `sdk.install` makes the cluster's spans go through the same provider, with the derived
ids its run and wait spans need. The provider records only while a test here holds `exported`:
in-process runs of the rest of the session create spans that nobody exports, and the cluster's
tests see no installed provider (tests/integration/test_tracing_in_thread.py).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from graphrunner.telemetry import sdk

HERE = Path(__file__).resolve().parent
for folder in (HERE.parent, HERE.parents[1] / "integration"):  # conformance_fixtures; support.wait_for
    if str(folder) not in sys.path:
        sys.path.append(str(folder))


class Switched(SpanProcessor):
    """Hands ended spans to `inner` while `on`."""

    def __init__(self, inner: SpanProcessor) -> None:
        self.inner, self.on = inner, False

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing to do when a span starts."""

    def on_end(self, span: ReadableSpan) -> None:
        """Export `span` while on."""
        if self.on:
            self.inner.on_end(span)

    def shutdown(self) -> None:
        """Shut the inner processor down."""
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush the inner processor."""
        return self.inner.force_flush(timeout_millis)


@pytest.fixture(scope="session")
def recording() -> tuple[TracerProvider, Switched, InMemorySpanExporter]:
    """The session's global tracer provider (built on first use), its switch and its exporter."""
    exporter = InMemorySpanExporter()
    switch = Switched(SimpleSpanProcessor(exporter))
    provider = TracerProvider(id_generator=sdk.forced_ids_class()())
    provider.add_span_processor(switch)
    trace.set_tracer_provider(provider)
    assert trace.get_tracer_provider() is provider, "another global tracer provider was set first"
    return provider, switch, exporter


@pytest.fixture
def exported(
    recording: tuple[TracerProvider, Switched, InMemorySpanExporter],
) -> Iterator[InMemorySpanExporter]:
    """The spans ended during the test: in-process runs' and the cluster's."""
    provider, switch, exporter = recording
    exporter.clear()
    sdk.install(provider)
    switch.on = True
    try:
        yield exporter
    finally:
        switch.on = False
        sdk.uninstall(provider)
        exporter.clear()
