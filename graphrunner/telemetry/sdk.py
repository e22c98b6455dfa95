"""The OpenTelemetry SDK, set up from the standard `OTEL_*` variables in graphrunner's own processes.

Only a worker process (after Celery's fork: the batch processor's thread must be the child's),
`graphrunner run` and `graphrunner ui` call `configure`; a producer's process keeps its own
tracer provider, or none. Nothing is set up, and nothing exported, unless the environment asks
for it:

- traces when `OTEL_TRACES_EXPORTER` names an exporter (`otlp`, `console`), or when an OTLP
  endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) and
  `OTEL_TRACES_EXPORTER` is not `none`;
- metrics likewise, by `OTEL_METRICS_EXPORTER` and the metrics endpoint;
- `OTEL_SDK_DISABLED=true` turns both off.

The OTLP protocol is `OTEL_EXPORTER_OTLP_PROTOCOL` (or the per-signal one): `http/protobuf`
(the default) or `grpc`; the exporters read their endpoint, headers and timeouts themselves,
the tracer provider its sampler (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`), the batch
processor its `OTEL_BSP_*`, the resource `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`.
Metric exemplars are off unless `OTEL_METRICS_EXEMPLAR_FILTER` asks for them (they cost a
reservoir offer per measurement; `trace_based` links a step's duration to its trace).
Each process names itself: `service.instance.id` (`host:pid`), `process.pid`, `host.name`.
The SDK and exporters are the `otel` extra: `pip install 'graphrunner[otel]'`.
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from graphrunner.errors import ConfigurationError
from graphrunner.telemetry import ids
from graphrunner.telemetry import metrics as measured

log = logging.getLogger("graphrunner.telemetry")
EXPORTERS = ("otlp", "console", "none")
PROTOCOLS = ("http/protobuf", "grpc")


@dataclass(frozen=True)
class Wanted:
    """What the environment asks for: the trace and metric exporters (empty: none)."""

    traces: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()


_configured: Wanted | None = None
_providers: list[Any] = []
_tracer_provider: Any = None


def wanted(env: Mapping[str, str] | None = None) -> Wanted:
    """The exporters `env` (the process environment) asks for; raises `ConfigurationError`."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return Wanted()
    return Wanted(traces=_exporters(env, "TRACES"), metrics=_exporters(env, "METRICS"))


def _exporters(env: Mapping[str, str], signal: str) -> tuple[str, ...]:
    variable = f"OTEL_{signal}_EXPORTER"
    named = [n.strip().lower() for n in env.get(variable, "").split(",") if n.strip()]
    for name in named:
        if name not in EXPORTERS:
            raise ConfigurationError(f"{variable}={env[variable]!r}: expected one of {', '.join(EXPORTERS)}")
    if named:
        return tuple(n for n in named if n != "none")
    endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")
    return ("otlp",) if endpoint else ()


def protocol(env: Mapping[str, str], signal: str) -> str:
    """The OTLP protocol for `signal` (TRACES, METRICS); raises `ConfigurationError`."""
    variable = f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL"
    if not env.get(variable):
        variable = "OTEL_EXPORTER_OTLP_PROTOCOL"
    value = env.get(variable, "http/protobuf").strip().lower()
    if value not in PROTOCOLS:
        raise ConfigurationError(f"{variable}={value!r}: expected one of {', '.join(PROTOCOLS)}")
    return value


def configure(role: str, env: Mapping[str, str] | None = None) -> Wanted:
    """Set up the SDK for this process (`role`: worker, run, ui) as the environment asks: once
    per process (again in a forked child). Returns what was set up."""
    global _configured
    env = os.environ if env is None else env
    want = wanted(env)
    if _configured is not None or not (want.traces or want.metrics):
        return _configured or want
    try:
        resource = _resource(role)
    except ImportError as exc:
        raise ConfigurationError(
            f"OTEL_* asks for {', '.join((*want.traces, *want.metrics))} export, but the OpenTelemetry SDK "
            f"is not installed ({exc.name}): pip install 'graphrunner[otel]'"
        ) from None
    if want.traces:
        _traces(resource, want.traces, env)
    if want.metrics:
        _metrics(resource, want.metrics, env)
    _configured = want
    atexit.register(shutdown)
    log.info("OpenTelemetry: traces %s, metrics %s", want.traces or "off", want.metrics or "off")
    return want


def _resource(role: str) -> Any:
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource

    host, pid = socket.gethostname(), os.getpid()
    ours = Resource.create(
        {
            "service.name": f"graphrunner-{role}",
            "service.instance.id": f"{host}:{pid}",
            "process.pid": pid,
            "host.name": host,
        }
    )
    return ours.merge(OTELResourceDetector().detect())  # OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME win


def _traces(resource: Any, exporters: tuple[str, ...], env: Mapping[str, str]) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=resource, id_generator=forced_ids_class()())
    for name in exporters:
        provider.add_span_processor(BatchSpanProcessor(_span_exporter(name, env)))
    install(provider)
    trace.set_tracer_provider(provider)


def install(provider: Any) -> None:
    """Emit graphrunner's spans through `provider` (a worker's, or a test's own, which need not be
    the global one); spans ended later get derived ids when it was built with `forced_ids_class()`
    as its id generator."""
    global _tracer_provider
    _tracer_provider = provider
    _providers.append(provider)
    ids.honour(isinstance(getattr(provider, "id_generator", None), forced_ids_class()))


def uninstall(provider: Any) -> None:
    """Stop emitting through `provider` (a test's)."""
    global _tracer_provider
    if _tracer_provider is provider:
        _tracer_provider = None
        ids.honour(False)
    if provider in _providers:
        _providers.remove(provider)


def tracer_provider() -> Any:
    """The tracer provider graphrunner's spans go through: the one installed, else the global one."""
    from opentelemetry import trace

    return _tracer_provider if _tracer_provider is not None else trace.get_tracer_provider()


def _span_exporter(name: str, env: Mapping[str, str]) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if protocol(env, "TRACES") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # type: ignore[assignment]
    return OTLPSpanExporter()


def _metrics(resource: Any, exporters: tuple[str, ...], env: Mapping[str, str]) -> None:
    from opentelemetry import metrics

    provider = _meter_provider(resource, exporters, env)
    _providers.append(provider)
    metrics.set_meter_provider(provider)
    measured.use_global_meter_provider()


def main_process_meter(env: Mapping[str, str] | None = None) -> Any:
    """A meter provider of a prefork worker's own process (its timers, sweeps and refused
    messages), not the global one: its pool processes set up their own after the fork. None
    when metrics are not wanted."""
    env = os.environ if env is None else env
    want = wanted(env)
    if not want.metrics:
        return None
    provider = _meter_provider(_resource("worker"), want.metrics, env)
    atexit.register(provider.shutdown)
    return provider


def _meter_provider(resource: Any, exporters: tuple[str, ...], env: Mapping[str, str]) -> Any:
    """A meter provider exporting to `exporters` periodically (`OTEL_METRIC_EXPORT_INTERVAL`)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    readers = [PeriodicExportingMetricReader(_metric_exporter(name, env)) for name in exporters]
    return MeterProvider(resource=resource, metric_readers=readers, exemplar_filter=_exemplars(env))


def _exemplars(env: Mapping[str, str]) -> Any:
    """The exemplar filter: `OTEL_METRICS_EXEMPLAR_FILTER` when set (`trace_based` links a step's
    duration to its trace, at a cost per measurement), else none are kept."""
    from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter

    if env.get("OTEL_METRICS_EXEMPLAR_FILTER"):
        return None  # the SDK reads the variable itself
    return AlwaysOffExemplarFilter()


def _metric_exporter(name: str, env: Mapping[str, str]) -> Any:
    if name == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        return ConsoleMetricExporter()
    if protocol(env, "METRICS") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter  # type: ignore[assignment]
    return OTLPMetricExporter()


def flush() -> None:
    """Export what the providers hold now (a worker process about to exit, a test)."""
    for provider in _providers:
        provider.force_flush()


def shutdown() -> None:
    """Flush and stop the providers this process set up."""
    while _providers:
        _providers.pop().shutdown()


_forced_ids: type | None = None


def forced_ids_class() -> type:
    """`ForcedIds`: the SDK's random id generator, except for ids `ids.forcing` set (built on first
    use: the SDK is an extra)."""
    global _forced_ids
    if _forced_ids is None:
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

        class ForcedIds(RandomIdGenerator):
            """Random ids, except the ids `ids.forcing` set for the span being started."""

            def generate_span_id(self) -> int:
                forced = ids.forced()
                return forced[1] if forced else super().generate_span_id()

            def generate_trace_id(self) -> int:
                forced = ids.forced()
                return forced[0] if forced else super().generate_trace_id()

        _forced_ids = ForcedIds
    return _forced_ids
