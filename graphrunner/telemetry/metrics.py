"""What workers count and time, as OpenTelemetry instruments (meter `graphrunner`) and, when a
worker serves `--metrics-port`, on its Prometheus endpoint (`telemetry/prometheus.py`).

The callers see plain functions (`step_done`, `run_finished`, ...). They record through the
OpenTelemetry *API*: nothing is kept or exported unless the process set a `MeterProvider`
(`telemetry/sdk.py`, by `OTEL_METRICS_EXPORTER`). The instruments are created on first use from
the API's global meter, which is a proxy until a provider is set: instruments created before
(in a worker's main process, before the pool forks) record into the provider set later (in each
pool process). With nothing configured (no meter provider graphrunner set up, no endpoint) a call
returns at once: a worker without metrics pays nothing per step. The Prometheus side is recorded
only in a worker whose endpoint is on (`record_into`).

Every attribute is bounded: a graph id, a node name, an outcome or status, a queue, a reason or a
repair's kind. A run id never is (one time series per run would grow without end).

Runs in flight (`graphrunner.runs.in_flight`, by status: pending, running, paused) is an
observable gauge read from the store's status indexes when it is collected, not an up-down
counter kept by workers: a run starts on one worker and ends on another (or on none, when it is
cancelled by an operator or its worker dies), so no worker's own count means anything, and a sum
of per-process counts drifts with every restart. Every worker that watches the store
(`watch_runs`) reports the same cluster-wide number: aggregate it with `max()` across workers,
never `sum()`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from graphrunner.run_status import RunStatus

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

log = logging.getLogger("graphrunner.telemetry")
METER = "graphrunner"
IN_FLIGHT = (RunStatus.PENDING.value, RunStatus.RUNNING.value, RunStatus.PAUSED.value)
# seconds: a step may take milliseconds (a gate) or an hour (a tool with a long timeout)
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


@dataclass(frozen=True)
class Instrument:
    """One instrument: its OpenTelemetry name, kind, unit, attribute names and meaning."""

    name: str
    kind: Literal["counter", "histogram", "gauge"]
    unit: str
    labels: tuple[str, ...]
    description: str


STEPS = Instrument(
    "graphrunner.steps", "counter", "{step}", ("graph", "node", "outcome"),
    "Tasks that took a step of a run, by how the task ended (ok, error, end, paused, suspended, retry, ...)",
)  # fmt: skip
STEP_DURATION = Instrument(
    "graphrunner.step.duration", "histogram", "s", ("graph", "node", "outcome"),
    "Time a task spent on a step, from taking up its message to committing",
)  # fmt: skip
QUEUE_WAIT = Instrument(
    "graphrunner.step.queue_wait", "histogram", "s", ("graph", "node", "queue"),
    "Time a step message waited on its queue (from when it was sent or came due to its task's start)",
)  # fmt: skip
RUNS_FINISHED = Instrument(
    "graphrunner.runs.finished", "counter", "{run}", ("graph", "status"),
    "Runs that ended or paused, by status (completed, completed_with_errors, failed, cancelled, paused)",
)  # fmt: skip
RUNS_IN_FLIGHT = Instrument(
    "graphrunner.runs.in_flight", "gauge", "{run}", ("status",),
    "Runs pending, running or paused in the whole cluster (every worker reports it: take max())",
)  # fmt: skip
ITEMS = Instrument(
    "graphrunner.foreach.items", "counter", "{item}", ("graph", "node", "outcome"),
    "Parallel foreach items run, by outcome (ok, error)",
)  # fmt: skip
ITEM_DURATION = Instrument(
    "graphrunner.foreach.item.duration", "histogram", "s", ("graph", "node", "outcome"),
    "Time a parallel foreach item took",
)  # fmt: skip
RETRIES = Instrument(
    "graphrunner.retries", "counter", "{retry}", ("graph", "node"), "Retries of an action"
)  # fmt: skip
REDELIVERIES = Instrument(
    "graphrunner.redeliveries", "counter", "{message}", ("what",),
    "Step or item messages the broker delivered again (a worker died, or Redis or the broker was in trouble)",
)  # fmt: skip
DEAD_LETTERS = Instrument(
    "graphrunner.dead_letters", "counter", "{message}", ("reason",),
    "Messages refused as unreadable and kept in the dead-letter list",
)  # fmt: skip
REPAIRS = Instrument(
    "graphrunner.sweeper.repairs", "counter", "{repair}", ("kind",),
    "What the sweeper sent again for stalled runs, by kind (resent_step, resent_items, woke_parent, ...)",
)  # fmt: skip
TIMERS_DUE = Instrument(
    "graphrunner.timers.due", "counter", "{timer}", (),
    "Durable timers (sleeps, retry backoffs, polls) that came due and were sent",
)  # fmt: skip
INSTRUMENTS = (
    STEPS, STEP_DURATION, QUEUE_WAIT, RUNS_FINISHED, RUNS_IN_FLIGHT, ITEMS, ITEM_DURATION,
    RETRIES, REDELIVERIES, DEAD_LETTERS, REPAIRS, TIMERS_DUE,
)  # fmt: skip


@runtime_checkable
class CountsRuns(Protocol):
    """A store that counts its runs in one status (from its status index)."""

    def count_runs(self, status: str) -> int:
        """How many runs are in `status` now."""
        ...


class Sink(Protocol):
    """A second place the facade records into (the Prometheus endpoint's instruments)."""

    def add(self, instrument: Instrument, attributes: Mapping[str, str], amount: float) -> None:
        """Add `amount` to a counter."""

    def observe(self, instrument: Instrument, attributes: Mapping[str, str], value: float) -> None:
        """Record `value` into a histogram."""


_lock = threading.Lock()
_provider: MeterProvider | None = None  # None: the API's global provider
_otel: dict[str, Any] | None = None  # the OpenTelemetry instruments by name, made on first use
_sink: Sink | None = None
_runs: Callable[[], Mapping[str, int]] | None = None
_global = False  # graphrunner set the global meter provider up (`sdk`)
_recording = False  # anything takes the measurements: the facade returns at once otherwise


# -- the facade -------------------------------------------------------------------------------------


def step_done(graph: str, node: str, outcome: str, seconds: float) -> None:
    """A task that took a step of a run ended with `outcome` after `seconds`."""
    if not _recording:
        return
    attributes = {"graph": graph, "node": node, "outcome": outcome}
    _add(STEPS, attributes)
    _observe(STEP_DURATION, attributes, seconds)


def step_queued(graph: str, node: str, queue: str, seconds: float) -> None:
    """A step message waited `seconds` on `queue` before its task started."""
    if not _recording:
        return
    _observe(QUEUE_WAIT, {"graph": graph, "node": node, "queue": queue}, seconds)


def run_finished(graph: str, status: str) -> None:
    """A run ended (or paused) with `status`."""
    if not _recording:
        return
    _add(RUNS_FINISHED, {"graph": graph, "status": status})


def item_done(graph: str, node: str, outcome: str, seconds: float) -> None:
    """A parallel foreach item of `node` ended with `outcome` (ok, error) after `seconds`."""
    if not _recording:
        return
    attributes = {"graph": graph, "node": node, "outcome": outcome}
    _add(ITEMS, attributes)
    _observe(ITEM_DURATION, attributes, seconds)


def retried(graph: str, node: str) -> None:
    """An action of `node` is retried."""
    if not _recording:
        return
    _add(RETRIES, {"graph": graph, "node": node})


def redelivered(what: str) -> None:
    """The broker delivered a message again: `what` is `step` or `item`."""
    if not _recording:
        return
    _add(REDELIVERIES, {"what": what})


def dead_lettered(reason: str) -> None:
    """A message was refused and dead-lettered; `reason` is one of a few fixed words."""
    if not _recording:
        return
    _add(DEAD_LETTERS, {"reason": reason})


def repaired(kind: str) -> None:
    """The sweeper repaired a stalled run: `kind` is what it did (`Repair.action`)."""
    if not _recording:
        return
    _add(REPAIRS, {"kind": kind})


def timers_due(count: int) -> None:
    """`count` durable timers came due and were sent."""
    if not _recording:
        return
    if count > 0:
        _add(TIMERS_DUE, {}, count)


# -- configuration ------------------------------------------------------------------------------------


def watch_runs(counts: Callable[[], Mapping[str, int]] | None) -> None:
    """Report runs in flight from `counts` (runs by status, e.g. from the store), or stop."""
    global _runs
    _runs = counts
    _instruments()  # the gauge exists from now on, in this process and the pool it forks


def runs_in_flight() -> dict[str, int]:
    """Runs by status (pending, running, paused) as `watch_runs` reads them; empty when not
    watched or when the store cannot be read (that collection has no sample: no false zero)."""
    counts = _runs
    if counts is None:
        return {}
    try:
        found = counts()
    except Exception as exc:  # the store is away: say so, never fail an export or a scrape
        log.warning("could not count the runs in flight (%s)", exc)
        return {}
    return {status: int(found.get(status, 0)) for status in IN_FLIGHT}


def record_into(sink: Sink | None) -> None:
    """Also record into `sink` (the Prometheus endpoint's instruments), or stop."""
    global _sink
    _sink = sink
    _update()


def use_meter_provider(provider: MeterProvider | None) -> None:
    """Take the instruments from `provider` instead of the global one (None: back to it): a test's, or
    a prefork worker's main process's own (`cluster/worker/observed.py`)."""
    global _provider, _otel
    with _lock:
        _provider, _otel = provider, None
    _update()


def use_global_meter_provider() -> None:
    """graphrunner set the global meter provider up (`sdk`, by OTEL_METRICS_EXPORTER): record into it."""
    global _global
    _global = True
    _update()


def _update() -> None:
    """Record only when something takes the measurements: a meter provider graphrunner set up,
    or the Prometheus endpoint (a worker without either pays nothing per step)."""
    global _recording
    _recording = _provider is not None or _global or _sink is not None


# -- inside --------------------------------------------------------------------------------------------


def _add(instrument: Instrument, attributes: Mapping[str, str], amount: float = 1) -> None:
    _instruments()[instrument.name].add(amount, attributes)
    sink = _sink
    if sink is not None:
        sink.add(instrument, attributes, amount)


def _observe(instrument: Instrument, attributes: Mapping[str, str], value: float) -> None:
    _instruments()[instrument.name].record(value, attributes)
    sink = _sink
    if sink is not None:
        sink.observe(instrument, attributes, value)


def _instruments() -> dict[str, Any]:
    made = _otel
    if made is None:
        with _lock:
            made = _otel if _otel is not None else _make()
    return made


def _make() -> dict[str, Any]:
    """The OpenTelemetry instruments (under `_lock`)."""
    global _otel
    from opentelemetry import metrics

    meter = (_provider or metrics.get_meter_provider()).get_meter(METER)
    made: dict[str, Any] = {}
    for spec in INSTRUMENTS:
        if spec.kind == "counter":
            made[spec.name] = meter.create_counter(spec.name, unit=spec.unit, description=spec.description)
        elif spec.kind == "histogram":
            made[spec.name] = meter.create_histogram(
                spec.name, unit=spec.unit, description=spec.description,
                explicit_bucket_boundaries_advisory=list(BUCKETS),
            )  # fmt: skip
        else:
            made[spec.name] = meter.create_observable_gauge(
                spec.name, callbacks=[_observe_runs], unit=spec.unit, description=spec.description
            )
    _otel = made
    return made


def _observe_runs(options: CallbackOptions) -> Iterable[Observation]:
    from opentelemetry.metrics import Observation

    return [Observation(count, {"status": status}) for status, count in runs_in_flight().items()]
