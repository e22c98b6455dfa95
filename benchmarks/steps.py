"""Steps per second of graphrunner against a bare Celery baseline, on a private Redis and private workers.

    python -m benchmarks.steps [--repeat 2] [--chain-steps 1000] [--prefetch 1,4] [--json]

Times 1 run of 1,000 steps and 20 concurrent runs of 1,000 steps on both sides, rounds
interleaved, and prints medians, CPU per step by process and a verdict per DESIGN §9 target.
See benchmarks/README.md for the scenarios and how to read the output.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from typing import Any

import redis

from benchmarks import report
from benchmarks.cpu import CpuProbe, per_step
from benchmarks.drivers import BaselineDriver, Driver, GraphDriver, Timing
from benchmarks.processes import (
    Worker,
    WorkerOptions,
    baseline_command,
    clean_env,
    graphrunner_command,
    running_worker,
    terminate_as_exit,
)
from benchmarks.roundtrips import client_address, monitoring, tally
from graphrunner.embedded import EmbeddedRedis

WARM_UP = (4, 20)  # chains, steps: touches both pool processes before anything is timed
BASELINE_EVENTS = "baseline+ev"
WITH_EVENTS = "+ev"
LOAD_WARNING = 0.5  # 1-minute load average above which the run is flagged as noisy


@dataclass(frozen=True)
class Scenario:
    """`chains` chains (runs) of `steps` steps each, started at once."""

    chains: int
    steps: int

    @property
    def label(self) -> str:
        """E.g. `20x250`."""
        return f"{self.chains}x{self.steps}"

    @property
    def timeout(self) -> float:
        """Seconds to allow before calling the scenario stuck (at least 20 steps/s)."""
        return 60 + self.chains * self.steps / 20


@dataclass(frozen=True)
class Phase:
    """One worker lifetime and the drivers (one per side) timed against it."""

    name: str
    command: list[str]
    env: dict[str, str]
    drivers: Callable[[], dict[str, Driver]]


@dataclass(frozen=True)
class Bench:
    """The private Redis and the options every phase shares."""

    server: EmbeddedRedis
    args: argparse.Namespace

    @property
    def url(self) -> str:
        """The private Redis's URL."""
        return self.server.url

    def probe(self, worker: Worker) -> CpuProbe:
        """A CPU probe for this Redis and `worker`."""
        assert self.server.process is not None
        return CpuProbe(self.server.process.pid, worker.process.pid)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.steps", description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=2, help="interleaved repetitions (median reported)")
    p.add_argument("--steps", type=int, default=1000, help="steps of the single-chain scenario")
    p.add_argument("--chains", type=int, default=20, help="chains (runs) of the concurrent scenario")
    p.add_argument("--chain-steps", type=int, default=1000, help="steps per chain, concurrent scenario")
    p.add_argument("--graphs", default="gate,echo", help="graphrunner loops to time: gate, echo")
    p.add_argument("--prefetch", default="1", help="worker prefetch multipliers to compare, e.g. 1,4")
    p.add_argument("--concurrency", type=int, default=2, help="prefork processes per worker")
    p.add_argument("--loglevel", default="WARNING", help="worker log level (both sides)")
    p.add_argument(
        "--baseline-events",
        action="store_true",
        help=f"also time the baseline with task events ({BASELINE_EVENTS})",
    )
    p.add_argument(
        "--graphrunner-events",
        action="store_true",
        help=f"also time graphrunner with Celery task events on, as under Flower (gate{WITH_EVENTS}, ...)",
    )
    p.add_argument("--roundtrip-steps", type=int, default=1000, help="steps of the MONITOR run (0: skip)")
    p.add_argument("--json", action="store_true", help="also print every figure as one JSON line")
    args = p.parse_args(argv)
    args.graphs = [g for g in args.graphs.split(",") if g]
    args.prefetch = [int(x) for x in args.prefetch.split(",") if x]
    return args


def say(message: str) -> None:
    """Progress on stderr."""
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def baseline_phase(bench: Bench, prefetch: int, events: bool) -> Phase:
    """The bare Celery worker (with or without task events) and its driver."""
    options = WorkerOptions(concurrency=bench.args.concurrency, loglevel=bench.args.loglevel)
    env = {
        "BENCH_REDIS_URL": bench.url,
        "BENCH_PREFETCH": str(prefetch),
        "BENCH_EVENTS": "1" if events else "0",
    }
    side = BASELINE_EVENTS if events else report.BASELINE
    return Phase(
        side,
        baseline_command(options),
        clean_env(env),
        lambda: {side: BaselineDriver(bench.url, prefetch, events)},
    )


def graphrunner_phase(bench: Bench, prefetch: int, events: bool) -> Phase:
    """The graphrunner worker (task events off, its default, or on) and one driver per loop graph."""
    options = WorkerOptions(concurrency=bench.args.concurrency, loglevel=bench.args.loglevel)
    env = {
        "GRAPHRUNNER_REDIS_URL": bench.url,
        "GRAPHRUNNER_PREFETCH": str(prefetch),
        "GRAPHRUNNER_QUIET": "1",
        "GRAPHRUNNER_TASK_EVENTS": "1" if events else "0",
    }
    suffix = WITH_EVENTS if events else ""

    def drivers() -> dict[str, Driver]:
        return {k + suffix: GraphDriver(bench.url, prefetch, k, events=events) for k in bench.args.graphs}

    return Phase(f"graphrunner{suffix}", graphrunner_command(options), clean_env(env), drivers)


def phases(bench: Bench, prefetch: int) -> list[Phase]:
    """Every worker lifetime at one prefetch multiplier: baseline(s), then graphrunner(s)."""
    found = [baseline_phase(bench, prefetch, False)]
    if bench.args.baseline_events:
        found.append(baseline_phase(bench, prefetch, True))
    found.append(graphrunner_phase(bench, prefetch, False))
    if bench.args.graphrunner_events:
        found.append(graphrunner_phase(bench, prefetch, True))
    return found


def timed(driver: Driver, scenario: Scenario, worker: Worker) -> Timing:
    """Run one scenario; a stuck one reports the worker's log."""
    try:
        return driver.run(scenario.chains, scenario.steps, scenario.timeout)
    except TimeoutError as exc:
        worker.check_alive()
        raise TimeoutError(f"{exc}; worker log:\n{worker.tail()}") from exc


def run_phase(
    bench: Bench, phase: Phase, scenarios: list[Scenario], prefetch: int, results: report.Results
) -> None:
    """Start the phase's worker, warm it up, time every scenario for every side, stop it."""
    with running_worker(phase.name, phase.command, phase.env) as worker:
        probe = bench.probe(worker)
        for side, driver in phase.drivers().items():
            try:
                timed(driver, Scenario(*WARM_UP), worker)
                for scenario in scenarios:
                    before = probe.read()
                    t = timed(driver, scenario, worker)
                    cpu = per_step(before, probe.read(), t.total_steps)
                    results.add(report.Sample(prefetch, scenario.label, side, t.rate, t.seconds, cpu))
                    say(f"prefetch {prefetch} {side:11} {scenario.label:>8}: {_figures(t)}")
            finally:
                driver.close()


def _figures(t: Timing) -> str:
    return f"{t.rate:6.0f} steps/s ({t.seconds:.2f} s)"


def count_roundtrips(bench: Bench, phase: Phase, steps: int) -> dict[str, dict[str, Any]]:
    """Commands and round trips per step for each side of the phase, from MONITOR over one chain."""
    counts: dict[str, dict[str, Any]] = {}
    with running_worker(phase.name, phase.command, phase.env) as worker:
        for side, driver in phase.drivers().items():
            try:
                timed(driver, Scenario(*WARM_UP), worker)
                with monitoring(bench.url) as log:
                    timed(driver, Scenario(1, steps), worker)
                counts[side] = tally(log.commands(), {client_address(driver.poll)}).per_step(steps)
                say(f"round trips {side}: {counts[side]['round_trips']}")
            finally:
                driver.close()
    return counts


def environment(url: str) -> dict[str, Any]:
    """Versions and machine facts that go with the figures."""
    server = redis.Redis.from_url(url)
    try:
        redis_version = server.info("server")["redis_version"]
    finally:
        server.close()
    packages = ("celery", "kombu", "redis", "graphrunner")
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": len(os.sched_getaffinity(0)),
        "redis_server": redis_version,
        **{name: version(name) for name in packages},
    }


def measure(bench: Bench) -> dict[str, Any]:
    """Every timed phase, interleaved, then the round-trip counts; all figures as plain data."""
    args = bench.args
    results = report.Results()
    scenarios = [Scenario(1, args.steps), Scenario(args.chains, args.chain_steps)]
    for rep in range(args.repeat):
        for prefetch in args.prefetch:
            ordered = phases(bench, prefetch)
            for phase in ordered if rep % 2 == 0 else reversed(ordered):
                say(f"repeat {rep + 1}/{args.repeat}: {phase.name} worker, prefetch {prefetch}")
                run_phase(bench, phase, scenarios, prefetch, results)
    counts: dict[str, dict[str, Any]] = {}
    if args.roundtrip_steps:
        for phase in phases(bench, args.prefetch[0]):
            counts.update(count_roundtrips(bench, phase, args.roundtrip_steps))
    return {
        "rows": results.rows(),
        "prefetch": report.prefetch_summary(results, scenarios[1].label),
        "roundtrips": counts,
    }


def show(figures: dict[str, Any]) -> None:
    """Print the tables on stdout."""
    print(report.table(figures["rows"]))
    for line in figures["prefetch"]:
        print(line)
    cpu = report.cpu_table(figures["rows"])
    if cpu:
        print("\nCPU time per step (median, microseconds) by process; worker = main + pool")
        print(cpu)
    verdicts = report.verdicts(figures["rows"])
    if verdicts:
        print("\nDESIGN §9 targets (medians)")
        print(verdicts)
    if figures["roundtrips"]:
        print("\nRedis commands per step (MONITOR, one chain)")
        print(report.roundtrip_table(figures["roundtrips"]))
        print("\n" + report.roundtrip_verdicts(figures["roundtrips"]))


def check_quiet() -> list[float]:
    """The load averages now; warn when the machine is already busy."""
    load = [round(x, 2) for x in os.getloadavg()]
    if load[0] > LOAD_WARNING:
        say(f"load average {load[0]} before starting: other work will make the figures noisy")
    return load


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; print the tables (and the JSON line with --json)."""
    args = parse_args(argv)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = check_quiet()
    with terminate_as_exit(), EmbeddedRedis() as server:
        say(f"private Redis at {server.url}")
        figures = measure(Bench(server, args))
        env = environment(server.url)
    env["load_average"] = {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]}
    show(figures)
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k != "json"}
        print(json.dumps({"date": started, "settings": settings, "environment": env, **figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
