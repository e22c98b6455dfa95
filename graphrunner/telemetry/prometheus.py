"""A worker's Prometheus endpoint (`graphrunner worker --metrics-port PORT`).

The instruments of `telemetry/metrics.py`, named as Prometheus names OpenTelemetry's (`.` becomes
`_`, seconds get `_seconds`, counters `_total`: `graphrunner.step.duration` is
`graphrunner_step_duration_seconds`), recorded by prometheus_client in multiprocess mode, so the
pool processes of a prefork worker are added up:

- `serve` runs in the worker's main process before the pool forks. It points
  `PROMETHEUS_MULTIPROC_DIR` at a fresh private directory (before prometheus_client makes a value:
  the library picks its multiprocess values by that variable), where every process of the worker
  writes its own memory-mapped files, and serves them added up (`MultiProcessCollector`) on a
  registry of its own, in a thread of the main process.
- A pool process that exits marks itself dead (Celery's `worker_process_shutdown`); its counts stay
  in the totals. The directory goes when the endpoint closes.
- Runs in flight is no multiprocess value: a collector of the endpoint's own registry reads the
  store when Prometheus scrapes (`metrics.runs_in_flight`).
- prometheus_client's lock in multiprocess mode is not fork-safe: a fork while a thread of the
  main process (housekeeping: timers, sweeps; the message guard) held it would leave the new pool
  process stuck. Every write goes through this module's lock, which a fork waits for.

Nothing is recorded into prometheus_client in a process tree whose worker serves no endpoint.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from graphrunner.telemetry import metrics
from graphrunner.telemetry.metrics import BUCKETS, INSTRUMENTS, Instrument

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

log = logging.getLogger("graphrunner.telemetry")
MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
_write = threading.Lock()
os.register_at_fork(before=_write.acquire, after_in_parent=_write.release, after_in_child=_write.release)


def prometheus_name(instrument: Instrument) -> str:
    """The Prometheus name of an instrument, as exposed (`graphrunner_steps_total`)."""
    name = instrument.name.replace(".", "_")
    if instrument.unit == "s":
        name += "_seconds"
    return f"{name}_total" if instrument.kind == "counter" else name


class Recorder:
    """prometheus_client's counters and histograms for the instruments (a `metrics.Sink`)."""

    def __init__(self) -> None:
        from prometheus_client import Counter, Histogram

        self._metrics: dict[str, Any] = {}
        for spec in INSTRUMENTS:
            name = prometheus_name(spec)
            if spec.kind == "counter":
                counter = Counter(name.removesuffix("_total"), spec.description, spec.labels, registry=None)
                self._metrics[spec.name] = counter
            elif spec.kind == "histogram":
                hist = Histogram(name, spec.description, spec.labels, registry=None, buckets=BUCKETS)
                self._metrics[spec.name] = hist

    def add(self, instrument: Instrument, attributes: Mapping[str, str], amount: float) -> None:
        """Add `amount` to the counter; never raises."""
        with self._writing(instrument):
            self._child(instrument, attributes).inc(amount)

    def observe(self, instrument: Instrument, attributes: Mapping[str, str], value: float) -> None:
        """Record `value` into the histogram; never raises."""
        with self._writing(instrument):
            self._child(instrument, attributes).observe(value)

    def _child(self, instrument: Instrument, attributes: Mapping[str, str]) -> Any:
        found = self._metrics[instrument.name]
        return found.labels(**attributes) if instrument.labels else found

    @contextlib.contextmanager
    def _writing(self, instrument: Instrument) -> Iterator[None]:
        try:
            with _write:
                yield
        except Exception as exc:  # a full disk must not fail a step
            log.warning("could not record %s for Prometheus (%s)", instrument.name, exc)


class InFlight:
    """The collector of runs in flight, read from the store when Prometheus scrapes."""

    def collect(self) -> Iterator[Metric]:
        """`graphrunner_runs_in_flight` by status (nothing when the store cannot be read)."""
        from prometheus_client.core import GaugeMetricFamily

        counts = metrics.runs_in_flight()
        if not counts:
            return
        spec = metrics.RUNS_IN_FLIGHT
        family = GaugeMetricFamily(prometheus_name(spec), spec.description, labels=spec.labels)
        for status, count in counts.items():
            family.add_metric([status], count)
        yield family


@dataclass
class Endpoint:
    """A running endpoint: its HTTP server and the directory of the processes' files."""

    server: Any
    directory: str
    previous: str | None

    @property
    def port(self) -> int:
        """The port it listens on."""
        return int(self.server.server_address[1])

    def close(self) -> None:
        """Stop serving and recording, and remove the directory."""
        metrics.record_into(None)
        self.server.shutdown()
        self.server.server_close()
        shutil.rmtree(self.directory, ignore_errors=True)
        _restore(self.previous)


def serve(host: str, port: int) -> Endpoint:
    """Serve the metrics of this process and of the pool it forks on `host:port` (see the module
    doc); raises `OSError` when the address cannot be listened on."""
    previous = os.environ.get(MULTIPROC_DIR)
    directory = tempfile.mkdtemp(prefix="graphrunner-metrics-")
    os.environ[MULTIPROC_DIR] = directory
    try:
        registry = _registry(directory)
        from prometheus_client import start_http_server

        server, _ = start_http_server(port, addr=host, registry=registry)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        _restore(previous)
        raise
    metrics.record_into(Recorder())
    _on_pool_process_exit()
    return Endpoint(server, directory, previous)


def _restore(previous: str | None) -> None:
    if previous is None:
        os.environ.pop(MULTIPROC_DIR, None)
    else:
        os.environ[MULTIPROC_DIR] = previous


def _registry(directory: str) -> Any:
    from prometheus_client import CollectorRegistry, values
    from prometheus_client.multiprocess import MultiProcessCollector

    if not getattr(values.ValueClass, "_multiprocess", False):
        # prometheus_client was imported before the variable was set: choose its values again
        values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]
    registry = CollectorRegistry(auto_describe=True)
    MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
    registry.register(InFlight())
    return registry


def _on_pool_process_exit() -> None:
    from celery import signals

    signals.worker_process_shutdown.connect(_exited, weak=False, dispatch_uid="graphrunner-prometheus")


def _exited(**_: Any) -> None:
    """A pool process exits: its live values go (its counts stay in the totals)."""
    directory = os.environ.get(MULTIPROC_DIR)
    if directory:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(os.getpid(), directory)  # type: ignore[no-untyped-call]
