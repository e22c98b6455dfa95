"""An OTLP/HTTP receiver for the tests: spans and metrics as the workers export them, on 127.0.0.1.

It answers `POST /v1/traces` and `POST /v1/metrics` (protobuf, as the OTLP/HTTP exporters send
them, gzip or not) and keeps what it was sent, decoded: `spans` (one `ReceivedSpan` each, with
its resource's attributes) and `points` (one `ReceivedPoint` per metric data point).
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}


def value_of(value: AnyValue) -> Any:
    """An OTLP attribute value as Python."""
    which = value.WhichOneof("value")
    if which == "array_value":
        return [value_of(v) for v in value.array_value.values]
    return getattr(value, which) if which else None


def attributes_of(pairs: Any) -> dict[str, Any]:
    """OTLP key-values as a dict."""
    return {kv.key: value_of(kv.value) for kv in pairs if isinstance(kv, KeyValue)}


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span, decoded."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    start_ns: int
    end_ns: int
    status: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    events: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReceivedPoint:
    """One exported metric data point: its metric, attributes, and value (a sum's or a gauge's
    value, a histogram's count)."""

    metric: str
    attributes: dict[str, Any]
    value: float
    resource: dict[str, Any] = field(default_factory=dict)


class Receiver:
    """What the receiver was sent."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.points: list[ReceivedPoint] = []
        self.lock = threading.Lock()
        self.url = ""

    def take_traces(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            resource = attributes_of(resource_spans.resource.attributes)
            for scope in resource_spans.scope_spans:
                with self.lock:
                    self.spans.extend(_span(s, resource) for s in scope.spans)

    def take_metrics(self, body: bytes) -> None:
        request = ExportMetricsServiceRequest.FromString(body)
        for resource_metrics in request.resource_metrics:
            resource = attributes_of(resource_metrics.resource.attributes)
            for scope in resource_metrics.scope_metrics:
                for metric in scope.metrics:
                    with self.lock:
                        self.points.extend(_points(metric, resource))

    def trace(self, trace_id: str) -> list[ReceivedSpan]:
        """The spans of trace `trace_id` received so far."""
        with self.lock:
            return [s for s in self.spans if s.trace_id == trace_id]


def _span(span: Any, resource: dict[str, Any]) -> ReceivedSpan:
    return ReceivedSpan(
        name=span.name,
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_id=span.parent_span_id.hex(),
        start_ns=span.start_time_unix_nano,
        end_ns=span.end_time_unix_nano,
        status=STATUS[span.status.code],
        attributes=attributes_of(span.attributes),
        resource=resource,
        events=tuple(e.name for e in span.events),
    )


def _points(metric: Any, resource: dict[str, Any]) -> Iterator[ReceivedPoint]:
    kind = metric.WhichOneof("data")
    data = getattr(metric, kind)
    for point in data.data_points:
        if kind == "histogram":
            value = float(point.count)
        else:
            value = point.as_double if point.WhichOneof("value") == "as_double" else float(point.as_int)
        yield ReceivedPoint(metric.name, attributes_of(point.attributes), value, resource)


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path == "/v1/traces":
                receiver.take_traces(body)
                answer = ExportTraceServiceResponse().SerializeToString()
            elif self.path == "/v1/metrics":
                receiver.take_metrics(body)
                answer = ExportMetricsServiceResponse().SerializeToString()
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    """A receiver listening on 127.0.0.1 (a free port): `receiver.url` is its endpoint."""
    receiver = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
