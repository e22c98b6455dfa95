"""Steps per second of graphrunner against a bare Celery baseline, on a private Redis and private workers.

    python -m benchmarks.steps [--repeat 2] [--chain-steps 1000] [--prefetch 1,4] [--store cluster]
                               [--broker amqp] [--rtt-ms 5] [--json]

Times 1 run of 1,000 steps and 20 concurrent runs of 1,000 steps on both sides, rounds
interleaved, and prints medians, CPU per step by process and a verdict per DESIGN §9 target.
With `--store cluster`, graphrunner keeps its run state on a private 3-master Redis Cluster and
uses the private Redis as its broker; the baseline is unchanged. `--broker amqp` makes a private
RabbitMQ node the broker of both sides; `--rtt-ms` adds round-trip time between the workers and
Redis (benchmarks/topology.py).
See benchmarks/README.md for the scenarios and how to read the output.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from typing import Any

import redis

from benchmarks import report, topology
from benchmarks.cluster import MASTERS, ClusterStore, private_cluster
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
from benchmarks.roundtrips import client_address, cluster_commands, monitoring, tally
from benchmarks.topology import Topology
from graphrunner.embedded import EmbeddedRedis, free_port
from graphrunner.settings import Settings

WARM_UP = (4, 20)  # chains, steps: touches both pool processes before anything is timed
BASELINE_EVENTS = "baseline+ev"
WITH_EVENTS = "+ev"
WITH_OTEL = "+otel"
FLOOR = 0.95  # a plain graphrunner side under this ratio fails the run (issue 27)
BELOW_FLOOR = 3
LOAD_WARNING = 0.5  # 1-minute load average above which the run is flagged as noisy
STORES = ("redis", "cluster")  # where graphrunner keeps its run state: the private Redis, or a cluster


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
    cluster: bool = False  # its run state is on the private Redis Cluster


@dataclass(frozen=True)
class Bench:
    """The private Redis (and Redis Cluster, with `--store cluster`; RabbitMQ node, with `--broker
    amqp`; round-trip-time proxy, with `--rtt-ms`) and the options every phase shares."""

    server: EmbeddedRedis
    args: argparse.Namespace
    cluster: ClusterStore | None = None
    otlp: str | None = None  # the OTLP sink's URL, with --otel
    topology: Topology = field(default_factory=Topology)

    @property
    def url(self) -> str:
        """The private Redis's URL (as the harness reaches it): the baseline's Redis, and graphrunner's
        broker unless RabbitMQ is."""
        return self.server.url

    @property
    def worker_url(self) -> str:
        """The private Redis as the workers reach it: through the round-trip-time proxy, if any."""
        return self.topology.worker_redis(self.url)

    @property
    def store_url(self) -> str:
        """Where graphrunner keeps its run state: the cluster's URL, else the private Redis's."""
        return self.cluster.url if self.cluster else self.url

    @property
    def broker_url(self) -> str | None:
        """graphrunner's broker when it is not its store's Redis: RabbitMQ, or with a cluster the private
        Redis (the workers reach it directly: `--rtt-ms` needs `--store redis`)."""
        if self.topology.rabbitmq:
            return self.topology.rabbitmq.url
        return self.url if self.cluster else None

    @property
    def result_backend_url(self) -> str | None:
        """Celery's result backend, when graphrunner cannot take it from its store or broker: the
        private Redis, with a cluster and RabbitMQ."""
        return self.url if self.cluster and self.topology.rabbitmq else None

    def probe(self, worker: Worker, cluster: bool) -> CpuProbe:
        """A CPU probe for this Redis, `worker`, the RabbitMQ node and the proxy if any and, if
        `cluster`, the cluster's nodes."""
        assert self.server.process is not None
        nodes = self.cluster.pids if cluster and self.cluster else ()
        return CpuProbe(self.server.process.pid, worker.process.pid, nodes, self.topology.cpu_groups())


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
        "--store",
        choices=STORES,
        default="redis",
        help=f"graphrunner's run state: the private Redis, or a private {MASTERS}-master Redis Cluster "
        "(the private Redis is then its broker; the baseline is unchanged)",
    )
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
    p.add_argument(
        "--otel",
        action="store_true",
        help=f"also time graphrunner tracing every step to an OTLP/HTTP sink (gate{WITH_OTEL}, ...)",
    )
    p.add_argument("--roundtrip-steps", type=int, default=1000, help="steps of the MONITOR run (0: skip)")
    p.add_argument("--json", action="store_true", help="also print every figure as one JSON line")
    p.add_argument(
        "--floor",
        type=float,
        default=FLOOR,
        help=f"exit {BELOW_FLOOR} (and say so on stderr) when a plain graphrunner side's steps/s ratio is "
        f"under this (default {FLOOR}; 0: never)",
    )
    topology.add_arguments(p)
    args = p.parse_args(argv)
    topology.check_arguments(p, args)
    args.graphs = [g for g in args.graphs.split(",") if g]
    args.prefetch = [int(x) for x in args.prefetch.split(",") if x]
    return args


def say(message: str) -> None:
    """Progress on stderr."""
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def baseline_phase(bench: Bench, prefetch: int, events: bool) -> Phase:
    """The bare Celery worker (with or without task events) and its driver."""
    options = WorkerOptions(concurrency=bench.args.concurrency, loglevel=bench.args.loglevel)
    rabbitmq = bench.topology.rabbitmq
    env = {
        "BENCH_REDIS_URL": bench.worker_url,
        "BENCH_PREFETCH": str(prefetch),
        "BENCH_EVENTS": "1" if events else "0",
        # read by Celery before the broker benchmarks/baseline.py configures (its Redis)
        **({"CELERY_BROKER_URL": rabbitmq.url} if rabbitmq else {}),
    }
    side = BASELINE_EVENTS if events else report.BASELINE
    return Phase(
        side,
        baseline_command(options),
        clean_env(env),
        lambda: {side: BaselineDriver(bench.url, prefetch, events)},
    )


def graphrunner_phase(bench: Bench, prefetch: int, events: bool, otel: bool = False) -> Phase:
    """The graphrunner worker (task events off, its default, or on; tracing off, its default, or
    on to the OTLP sink) and one driver per loop graph."""
    options = WorkerOptions(concurrency=bench.args.concurrency, loglevel=bench.args.loglevel)
    broker, backend = bench.broker_url, bench.result_backend_url
    env = {
        "GRAPHRUNNER_REDIS_URL": bench.cluster.url if bench.cluster else bench.worker_url,
        **({"GRAPHRUNNER_BROKER_URL": broker} if broker else {}),
        **({"GRAPHRUNNER_RESULT_BACKEND_URL": backend} if backend else {}),
        "GRAPHRUNNER_PREFETCH": str(prefetch),
        "GRAPHRUNNER_QUIET": "1",
        "GRAPHRUNNER_TASK_EVENTS": "1" if events else "0",
        **(otel_env(bench.otlp) if otel and bench.otlp else {}),
    }
    suffix = (WITH_EVENTS if events else "") + (WITH_OTEL if otel else "")

    def drivers() -> dict[str, Driver]:
        return {
            k + suffix: GraphDriver(
                bench.store_url, prefetch, k, events=events, broker_url=broker, result_backend_url=backend
            )
            for k in bench.args.graphs
        }

    command = graphrunner_command(options)
    return Phase(f"graphrunner{suffix}", command, clean_env(env), drivers, cluster=bench.cluster is not None)


def phases(bench: Bench, prefetch: int) -> list[Phase]:
    """Every worker lifetime at one prefetch multiplier: baseline(s), then graphrunner(s)."""
    found = [baseline_phase(bench, prefetch, False)]
    if bench.args.baseline_events:
        found.append(baseline_phase(bench, prefetch, True))
    found.append(graphrunner_phase(bench, prefetch, False))
    if bench.args.graphrunner_events:
        found.append(graphrunner_phase(bench, prefetch, True))
    if bench.otlp:
        found.append(graphrunner_phase(bench, prefetch, False, otel=True))
    return found


def otel_env(url: str) -> dict[str, str]:
    """Traces (every one sampled) and metrics of the worker to the OTLP sink at `url`."""
    return {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_METRICS_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": url,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_SERVICE_NAME": "graphrunner-bench",
    }


@contextmanager
def otlp_sink(wanted: bool) -> Iterator[str | None]:
    """The OTLP sink (`benchmarks.otlp_sink`) in a process of its own, with --otel."""
    if not wanted:
        yield None
        return
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.otlp_sink", str(port)], start_new_session=True
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


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
        probe = bench.probe(worker, phase.cluster)
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
                counts[side] = count_chain(bench, phase, driver, worker, steps)
                say(f"round trips {side}: {counts[side]['round_trips']}")
            finally:
                driver.close()
    return counts


def count_chain(bench: Bench, phase: Phase, driver: Driver, worker: Worker, steps: int) -> dict[str, Any]:
    """One chain of `steps` steps under MONITOR (the private Redis) and, for a phase on the cluster,
    between two INFO commandstats of its masters."""
    cluster = bench.cluster if phase.cluster else None
    polls = driver.polls
    with monitoring(bench.url) as log:
        before = cluster.commandstats() if cluster else None
        timed(driver, Scenario(1, steps), worker)
        after = cluster.commandstats() if cluster else None
    harness = {client_address(driver.poll)} if isinstance(driver.poll, redis.Redis) else set()
    result = tally(log.commands(), harness)
    if before is not None and after is not None:
        cluster_commands(result, before, after, driver.polls - polls)
    return result.per_step(steps)


def announce(server: EmbeddedRedis, cluster: ClusterStore | None, topo: Topology) -> None:
    """Say on stderr where the private servers are: the Redis, the Redis Cluster, the RabbitMQ node
    and the proxy (those that run)."""
    say(f"private Redis at {server.url}")
    if cluster:
        say(f"private Redis Cluster at {cluster.url}: ports {cluster.ports}, pids {cluster.pids}")
    if topo.rabbitmq:
        node = topo.rabbitmq
        say(f"private RabbitMQ {node.version} at {node.url} (process group {node.pgid})")
    if topo.proxy:
        say(f"RTT proxy (+{topo.proxy.rtt_ms:g} ms) on port {topo.proxy.port}, pid {topo.proxy.pid}")


def environment(url: str, topo: Topology | None = None) -> dict[str, Any]:
    """Versions and machine facts that go with the figures."""
    server = redis.Redis.from_url(url)
    try:
        redis_version = server.info("server")["redis_version"]
    finally:
        server.close()
    packages = ("celery", "kombu", "redis", "graphrunner")
    node = topo.rabbitmq if topo else None
    rabbitmq = {"rabbitmq_server": node.version, "amqp": version("amqp")} if node else {}
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": len(os.sched_getaffinity(0)),
        "redis_server": redis_version,
        **rabbitmq,
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
        "store": store_facts(bench),
        **bench.topology.facts(),
        "rows": results.rows(),
        "prefetch": report.prefetch_summary(results, scenarios[1].label),
        "roundtrips": counts,
    }


def store_facts(bench: Bench) -> dict[str, Any]:
    """Where graphrunner's run state was (the JSON line's `store`)."""
    rabbitmq = bench.topology.rabbitmq is not None
    if bench.cluster is None:
        return {"kind": "redis", "broker": "RabbitMQ" if rabbitmq else "the same Redis"}
    shards = Settings().cluster_shards  # the workers' and the drivers' default: no GRAPHRUNNER_* is set
    return {
        "kind": "cluster",
        "masters": len(bench.cluster.ports),
        "shards": shards,
        "broker": "RabbitMQ" if rabbitmq else "private Redis",
    }


def store_line(store: dict[str, Any]) -> str:
    """The store, as the first line of the tables."""
    if store["kind"] == "redis":
        also = "" if store["broker"] == "RabbitMQ" else ", also its broker"
        return f"graphrunner store: the private Redis{also} (--store redis)"
    amqp = store["broker"] == "RabbitMQ"
    broker = "RabbitMQ (result backend: the private Redis)" if amqp else "the private Redis"
    return (
        f"graphrunner store: a private Redis Cluster of {store['masters']} masters, {store['shards']} "
        f"shards; broker: {broker} (--store cluster); the baseline's state: the private Redis"
    )


def show(figures: dict[str, Any]) -> None:
    """Print the tables on stdout."""
    clustered = figures["store"]["kind"] == "cluster"
    print(store_line(figures["store"]))
    for line in topology.lines(figures):
        print(line)
    print(report.table(figures["rows"]))
    for line in figures["prefetch"]:
        print(line)
    cpu = report.cpu_table(figures["rows"])
    if cpu:
        print("\nCPU time per step (median, microseconds) by process; worker = main + pool")
        if clustered:
            role = "result backend" if figures["broker"]["kind"] == "amqp" else "broker"
            print(f"redis = the private Redis ({role}; the baseline's state), cluster = all cluster nodes")
        print(cpu)
    verdicts = report.verdicts(figures["rows"])
    if verdicts:
        print("\nDESIGN §9 targets (medians)")
        print(verdicts)
    if figures["roundtrips"]:
        show_roundtrips(figures["roundtrips"], clustered, figures["broker"]["kind"] == "amqp")


def show_roundtrips(counts: dict[str, dict[str, Any]], clustered: bool, amqp: bool = False) -> None:
    """The commands per step; the round-trip verdict where it applies (the broker on the store's Redis)."""
    if not clustered and not amqp:
        print("\nRedis commands per step (MONITOR, one chain)")
        print(report.roundtrip_table(counts))
        print("\n" + report.roundtrip_verdicts(counts))
        return
    if clustered:
        print("\nRedis commands per step (one chain): MONITOR of the private Redis; cluster = INFO")
        print("commandstats summed over the masters (in-script calls included, so no round trips)")
    else:
        print("\nRedis commands per step (MONITOR, one chain; the broker, RabbitMQ, is not counted)")
    print(report.roundtrip_table(counts))
    print("\nround-trip target (store + publish <= 2): not checked, the broker is not the store's Redis")


def check_quiet() -> list[float]:
    """The load averages now; warn when the machine is already busy."""
    load = [round(x, 2) for x in os.getloadavg()]
    if load[0] > LOAD_WARNING:
        say(f"load average {load[0]} before starting: other work will make the figures noisy")
    return load


def cluster_for(store: str) -> AbstractContextManager[ClusterStore | None]:
    """The private Redis Cluster for `--store cluster`; nothing for `--store redis`."""
    return private_cluster() if store == "cluster" else nullcontext()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; print the tables (and the JSON line with --json)."""
    args = parse_args(argv)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = check_quiet()
    with (
        terminate_as_exit(),
        EmbeddedRedis() as server,
        cluster_for(args.store) as cluster,
        topology.started(args, server.url) as topo,
        otlp_sink(args.otel) as otlp,
    ):
        announce(server, cluster, topo)
        figures = measure(Bench(server, args, cluster, otlp, topo))
        env = environment(server.url, topo)
    env["load_average"] = {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]}
    show(figures)
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k != "json"}
        print(json.dumps({"date": started, "settings": settings, "environment": env, **figures}))
    return check_floor(figures["rows"], args.floor)


def check_floor(rows: list[dict[str, Any]], floor: float) -> int:
    """0, or `BELOW_FLOOR` after saying loudly which graphrunner cells fell under `floor`."""
    low = report.below_floor(rows, floor) if floor > 0 else []
    for line in low:
        print(f"[bench] BELOW THE FLOOR: {line}", file=sys.stderr, flush=True)
    if low:
        say(f"{len(low)} cell(s) under {floor:.2f}x bare Celery: a regression, or a noisy machine (rerun)")
    return BELOW_FLOOR if low else 0


if __name__ == "__main__":
    sys.exit(main())
