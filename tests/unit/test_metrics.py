"""The metrics facade: what each call records, with which bounded attributes, and the
Prometheus side (names, and a forked process's counts added up on the endpoint)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from graphrunner.telemetry import metrics
from graphrunner.telemetry.prometheus import prometheus_name

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    """The facade's instruments taken from a provider of this test's own, read in memory."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    metrics.use_meter_provider(provider)
    try:
        yield reader
    finally:
        metrics.use_meter_provider(None)
        metrics.watch_runs(None)
        provider.shutdown()


def points(reader: InMemoryMetricReader) -> dict[str, list[tuple[dict[str, Any], Any]]]:
    """Data points by instrument name: (attributes, value or histogram count)."""
    found: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            assert scope.scope.name == "graphrunner"
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    value = point.count if hasattr(point, "count") else point.value
                    found.setdefault(metric.name, []).append((dict(point.attributes or {}), value))
    return found


def units(reader: InMemoryMetricReader) -> dict[str, str]:
    data = reader.get_metrics_data()
    assert data is not None
    return {m.name: m.unit or "" for r in data.resource_metrics for s in r.scope_metrics for m in s.metrics}


def test_each_call_records_its_instruments_with_bounded_attributes(reader: InMemoryMetricReader) -> None:
    metrics.step_done("g", "a", "ok", 0.2)
    metrics.step_done("g", "a", "ok", 0.4)
    metrics.step_queued("g", "a", "graphrunner", 0.01)
    metrics.run_finished("g", "completed")
    metrics.item_done("g", "each", "error", 1.5)
    metrics.retried("g", "a")
    metrics.redelivered("step")
    metrics.dead_lettered("not_json")
    metrics.repaired("resent_step")
    metrics.timers_due(3)
    metrics.timers_due(0)  # nothing came due: nothing recorded

    step = {"graph": "g", "node": "a", "outcome": "ok"}
    assert points(reader) == {
        "graphrunner.steps": [(step, 2)],
        "graphrunner.step.duration": [(step, 2)],
        "graphrunner.step.queue_wait": [({"graph": "g", "node": "a", "queue": "graphrunner"}, 1)],
        "graphrunner.runs.finished": [({"graph": "g", "status": "completed"}, 1)],
        "graphrunner.foreach.items": [({"graph": "g", "node": "each", "outcome": "error"}, 1)],
        "graphrunner.foreach.item.duration": [({"graph": "g", "node": "each", "outcome": "error"}, 1)],
        "graphrunner.retries": [({"graph": "g", "node": "a"}, 1)],
        "graphrunner.redeliveries": [({"what": "step"}, 1)],
        "graphrunner.dead_letters": [({"reason": "not_json"}, 1)],
        "graphrunner.sweeper.repairs": [({"kind": "resent_step"}, 1)],
        "graphrunner.timers.due": [({}, 3)],
    }


def test_units_and_histogram_buckets_are_in_seconds(reader: InMemoryMetricReader) -> None:
    metrics.step_done("g", "a", "ok", 42.0)
    assert units(reader) == {"graphrunner.steps": "{step}", "graphrunner.step.duration": "s"}
    data = reader.get_metrics_data()
    assert data is not None
    [duration] = [m for m in data.resource_metrics[0].scope_metrics[0].metrics if m.unit == "s"]
    [point] = duration.data.data_points
    assert tuple(point.explicit_bounds) == metrics.BUCKETS
    assert point.bucket_counts[metrics.BUCKETS.index(60.0)] == 1  # 30 < 42 <= 60


def test_runs_in_flight_are_read_when_collected(reader: InMemoryMetricReader) -> None:
    assert "graphrunner.runs.in_flight" not in points(reader)  # nobody watches the store: no sample
    counts = {"running": 4, "pending": 1, "completed": 99}
    metrics.watch_runs(lambda: counts)
    assert sorted(points(reader)["graphrunner.runs.in_flight"], key=lambda p: p[0]["status"]) == [
        ({"status": "paused"}, 0),
        ({"status": "pending"}, 1),
        ({"status": "running"}, 4),
    ]
    counts["running"] = 2
    assert ({"status": "running"}, 2) in points(reader)["graphrunner.runs.in_flight"]


def test_a_store_that_cannot_be_read_gives_no_sample(
    reader: InMemoryMetricReader, caplog: pytest.LogCaptureFixture
) -> None:
    def away() -> dict[str, int]:
        raise ConnectionError("Redis is away")

    metrics.watch_runs(away)
    assert "graphrunner.runs.in_flight" not in points(reader)
    assert "could not count the runs in flight (Redis is away)" in caplog.text


def test_prometheus_names_are_the_opentelemetry_names_translated() -> None:
    assert [prometheus_name(i) for i in metrics.INSTRUMENTS] == [
        "graphrunner_steps_total",
        "graphrunner_step_duration_seconds",
        "graphrunner_step_queue_wait_seconds",
        "graphrunner_runs_finished_total",
        "graphrunner_runs_in_flight",
        "graphrunner_foreach_items_total",
        "graphrunner_foreach_item_duration_seconds",
        "graphrunner_retries_total",
        "graphrunner_redeliveries_total",
        "graphrunner_dead_letters_total",
        "graphrunner_sweeper_repairs_total",
        "graphrunner_timers_due_total",
    ]
    assert all("run_id" not in i.labels for i in metrics.INSTRUMENTS)


def run_fresh(body: str) -> str:
    """Run `body` in a fresh interpreter (no provider, no endpoint set by another test); its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(body)], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_nothing_is_recorded_until_a_provider_is_set_and_early_instruments_then_record() -> None:
    out = run_fresh("""
        import sys
        from opentelemetry import metrics as api
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from graphrunner.telemetry import metrics

        metrics.step_done("g", "a", "ok", 0.1)  # nothing takes it: returns at once
        metrics.watch_runs(None)  # the instruments are made now, from the API's proxy
        assert "prometheus_client" not in sys.modules
        reader = InMemoryMetricReader()
        api.set_meter_provider(MeterProvider(metric_readers=[reader]))  # as sdk.py does, later
        metrics.use_global_meter_provider()
        data = reader.get_metrics_data()
        before = [m.name for r in data.resource_metrics for s in r.scope_metrics for m in s.metrics] if data else []
        metrics.step_done("g", "a", "ok", 0.1)
        data = reader.get_metrics_data()
        [steps] = [m for r in data.resource_metrics for s in r.scope_metrics for m in s.metrics
                   if m.name == "graphrunner.steps"]
        print(before, [p.value for p in steps.data.data_points])
    """)
    assert out.split() == ["[]", "[1]"]


def test_the_endpoint_adds_up_forked_processes_and_leaves_nothing_behind() -> None:
    out = run_fresh("""
        import os, urllib.request
        from prometheus_client.parser import text_string_to_metric_families
        from graphrunner.embedded import free_port
        from graphrunner.telemetry import metrics, prometheus

        metrics.step_done("g", "a", "ok", 0.1)  # before the endpoint: not on it
        metrics.watch_runs(lambda: {"running": 2})
        endpoint = prometheus.serve("127.0.0.1", free_port())
        metrics.step_done("g", "a", "ok", 0.1)
        pid = os.fork()
        if pid == 0:  # a pool process: its own file, added up by the endpoint
            metrics.step_done("g", "a", "ok", 0.1)
            metrics.step_done("g", "b", "error", 0.1)
            prometheus._exited()
            os._exit(0)
        os.waitpid(pid, 0)
        text = urllib.request.urlopen(f"http://127.0.0.1:{endpoint.port}/metrics").read().decode()
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name in ("graphrunner_steps_total", "graphrunner_runs_in_flight"):
                    print(s.name, ",".join(f"{k}={v}" for k, v in sorted(s.labels.items())), s.value)
        directory = endpoint.directory
        endpoint.close()
        print("left", os.path.exists(directory), os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
    """)
    assert sorted(out.splitlines()) == [
        "graphrunner_runs_in_flight status=paused 0.0",
        "graphrunner_runs_in_flight status=pending 0.0",
        "graphrunner_runs_in_flight status=running 2.0",
        "graphrunner_steps_total graph=g,node=a,outcome=ok 2.0",
        "graphrunner_steps_total graph=g,node=b,outcome=error 1.0",
        "left False None",
    ]


def test_a_port_in_use_is_refused_and_leaves_nothing_behind() -> None:
    out = run_fresh("""
        import glob, os, socket, tempfile
        from graphrunner.telemetry import metrics, prometheus

        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            before = set(glob.glob(os.path.join(tempfile.gettempdir(), "graphrunner-metrics-*")))
            try:
                prometheus.serve("127.0.0.1", taken.getsockname()[1])
            except OSError:
                after = set(glob.glob(os.path.join(tempfile.gettempdir(), "graphrunner-metrics-*")))
                print("refused", after - before, os.environ.get("PROMETHEUS_MULTIPROC_DIR"), metrics._sink)
    """)
    assert out.split() == ["refused", "set()", "None", "None"]
