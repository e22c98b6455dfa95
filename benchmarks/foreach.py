"""Items per second of a graphrunner parallel foreach against a bare Celery chord of the same size.

    python -m benchmarks.foreach [--sizes 1000,10000] [--repeat 2] [--store cluster] [--broker amqp]
                                 [--rtt-ms 5] [--json]

With `--store cluster`, graphrunner keeps its run state on a private 3-master Redis Cluster and uses
the private Redis as its broker; the chord baseline is unchanged.
See benchmarks/README.md ("foreach") for what it times and how to read the output.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import redis

from benchmarks import memory, report, topology
from benchmarks.cluster import MASTERS, ClusterStore
from benchmarks.cpu import per_step
from benchmarks.fanout import ChordDriver, FanOut, FanOutDriver, ForeachDriver
from benchmarks.processes import Worker, running_worker, terminate_as_exit
from benchmarks.roundtrips import HARNESS_COMMANDS
from benchmarks.steps import (
    STORES,
    Bench,
    Phase,
    announce,
    baseline_phase,
    check_quiet,
    cluster_for,
    environment,
    graphrunner_phase,
    say,
    store_facts,
    store_line,
)
from graphrunner.embedded import EmbeddedRedis

GRAPHRUNNER = "graphrunner"
TARGET = 0.85  # graphrunner items/s over the chord's, per size (DESIGN §9)
WARM_UP = 50  # items of the fan-out each worker runs once before anything is timed
MB = 2**20  # Redis's used_memory is shown in MiB


@dataclass(frozen=True)
class Side:
    """One side: its worker (command and environment) and the driver that times fan-outs on it."""

    name: str
    phase: Phase
    driver: Callable[[], FanOutDriver]


@dataclass(frozen=True)
class Run:
    """One timed fan-out: its time, and the VmHWM (MB) of the join process and of the worker's pool."""

    size: int
    side: str
    seconds: float
    submit_seconds: float
    join_pid: int | None
    join_role: str
    join_peak_mb: float | None
    pool_peak_mb: float | None
    main_peak_mb: float | None = None  # the worker's own process (the consumer)
    redis_used_mb: float | None = None  # Redis's used_memory at the end of the fan-out
    redis_peak_mb: float | None = None  # Redis's used_memory, sampled during the fan-out: its maximum
    calls_per_item: float | None = None  # Redis commands per item (INFO commandstats, scripts' too)
    cpu_us_per_item: dict[str, float] = field(default_factory=dict)  # CPU by process role (cpu.CpuProbe)
    # --store cluster, graphrunner's side only: the cluster's masters during the fan-out
    cluster_peak_mb: float | None = None  # used_memory summed over the masters, sampled: its maximum
    cluster_node_peaks_mb: list[float] | None = None  # each master's used_memory, sampled: its maximum
    cluster_calls_per_item: float | None = None  # INFO commandstats summed over the masters, delta


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.foreach", description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000,10000", help="items per fan-out, e.g. 1000,10000")
    p.add_argument("--repeat", type=int, default=2, help="interleaved repetitions (median reported)")
    p.add_argument("--prefetch", type=int, default=1, help="worker prefetch multiplier (both sides)")
    p.add_argument("--concurrency", type=int, default=2, help="prefork processes per worker")
    p.add_argument("--loglevel", default="WARNING", help="worker log level (both sides)")
    p.add_argument(
        "--store",
        choices=STORES,
        default="redis",
        help=f"graphrunner's run state: the private Redis, or a private {MASTERS}-master Redis Cluster "
        "(the private Redis is then its broker; the chord baseline is unchanged; not with --broker amqp "
        "or --rtt-ms); adds the cluster's memory, commands and CPU per item",
    )
    p.add_argument("--json", action="store_true", help="also print every figure as one JSON line")
    topology.add_arguments(p)
    args = p.parse_args(argv)
    topology.check_arguments(p, args)
    if args.store == "cluster" and args.broker == "amqp":
        p.error(
            "--store cluster needs --broker redis: on a cluster with RabbitMQ graphrunner's client needs a "
            "result backend Redis, which the foreach driver (benchmarks/fanout.py) does not pass"
        )
    args.sizes = sorted({int(x) for x in args.sizes.split(",") if x})
    if not args.sizes or min(args.sizes) < 1:
        p.error("--sizes needs positive item counts")
    return args


def sides(bench: Bench) -> list[Side]:
    """The chord baseline and graphrunner, with the workers benchmarks.steps uses (events off); with a
    cluster, graphrunner's run state is on it and its broker is the private Redis."""
    url, prefetch, broker = bench.url, bench.args.prefetch, bench.broker_url
    chord = baseline_phase(bench, prefetch, False)
    foreach = graphrunner_phase(bench, prefetch, False)
    # a result per item in state: 100,000 of them outgrow the default 1 MiB limit (both sides hold them)
    foreach.env["GRAPHRUNNER_MAX_STATE_BYTES"] = str(max(1 << 20, 64 * max(bench.args.sizes)))
    store = bench.store_url
    return [
        Side(report.BASELINE, chord, lambda: ChordDriver(url, prefetch)),
        Side(GRAPHRUNNER, foreach, lambda: ForeachDriver(store, prefetch, broker)),
    ]


def timed(driver: FanOutDriver, size: int, worker: Worker) -> FanOut:
    """One fan-out of `size` items (at least 20 items/s, or it is stuck); a stuck one shows the log."""
    try:
        return driver.run(size, 60 + size / 20)
    except TimeoutError as exc:
        worker.check_alive()
        raise TimeoutError(f"{exc}; worker log:\n{worker.tail()}") from exc


def run_side(bench: Bench, side: Side, size: int, results: report.Results, runs: list[Run]) -> None:
    """Start the side's worker, warm it up, time one fan-out of `size` items, read VmHWM, stop it."""
    with running_worker(side.phase.name, side.phase.command, side.phase.env) as worker:
        driver = side.driver()
        try:
            timed(driver, WARM_UP, worker)
            f, run = probed(bench, side, driver, worker, size)
        finally:
            driver.close()
    runs.append(run)
    results.add(report.Sample(bench.args.prefetch, str(size), side.name, f.rate, f.seconds))
    say(
        f"{side.name:11} {size:>6} items: {f.rate:7.0f} items/s ({f.seconds:.2f} s, submit "
        f"{f.submit_seconds:.2f} s); {_said(run)}"
    )


def probed(bench: Bench, side: Side, driver: FanOutDriver, worker: Worker, size: int) -> tuple[FanOut, Run]:
    """The timed fan-out, with Redis's (and the cluster's, on its side) memory and commands, and CPU."""
    probe = RedisProbe(bench.url)
    nodes = ClusterProbe(bench.cluster) if side.phase.cluster and bench.cluster else None
    cpu = bench.probe(worker, side.phase.cluster)
    before = cpu.read()
    f = timed(driver, size, worker)
    used = per_step(before, cpu.read(), size)
    redis_used, peak, calls = probe.read(size)
    run = replace(
        _run(side.name, f, worker.process.pid),
        redis_used_mb=redis_used,
        redis_peak_mb=peak,
        calls_per_item=calls,
        cpu_us_per_item=used,
    )
    return f, replace(run, **nodes.read(size)) if nodes else run


def _said(run: Run) -> str:
    """A run's memory and command figures, for the progress line."""
    line = (
        f"join pid {run.join_pid} ({run.join_role}) VmHWM {run.join_peak_mb} MB, "
        f"pool max {run.pool_peak_mb} MB, main {run.main_peak_mb} MB; "
        f"Redis {run.redis_used_mb} MB (peak {run.redis_peak_mb} MB), {run.calls_per_item} commands/item"
    )
    if run.cluster_peak_mb is None:
        return line
    return (
        f"{line}; cluster peak {run.cluster_peak_mb} MB (masters {run.cluster_node_peaks_mb}), "
        f"{run.cluster_calls_per_item} commands/item, {run.cpu_us_per_item.get('cluster')} us CPU/item"
    )


class UsedMemory:
    """used_memory of some Redis servers, read together every `EVERY` seconds in a thread until `stop`
    (used_memory_peak cannot be reset): each server's maximum, and the maximum of their sum."""

    EVERY = 0.2

    def __init__(self, clients: Sequence[redis.Redis]) -> None:
        self.clients = list(clients)
        self.peaks = [0] * len(self.clients)
        self.sum_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="redis-probe", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(self.EVERY):
            self.take()

    def take(self) -> list[int]:
        """used_memory of each server now (bytes); the maxima updated."""
        used = [int(client.info("memory")["used_memory"]) for client in self.clients]
        self.peaks = [max(peak, now) for peak, now in zip(self.peaks, used, strict=True)]
        self.sum_peak = max(self.sum_peak, sum(used))
        return used

    def stop(self) -> list[int]:
        """Stop sampling; used_memory of each server now, also counted in the maxima."""
        self._stop.set()
        self._thread.join()
        return self.take()


class RedisProbe:
    """Redis's memory and the commands it ran during one fan-out: commandstats reset when it
    begins, used_memory sampled (`UsedMemory`)."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url, decode_responses=True)
        self.client.config_resetstat()
        self.memory = UsedMemory([self.client])

    def read(self, items: int) -> tuple[float, float, float]:
        """used_memory now, its sampled maximum (MB), and the commands per item since the reset."""
        try:
            (used,) = self.memory.stop()
            calls = sum(int(v["calls"]) for v in self.client.info("commandstats").values())
        finally:
            self.client.close()
        return round(used / MB, 1), round(self.memory.sum_peak / MB, 1), round(calls / items, 1)


class ClusterProbe:
    """The cluster's masters during one fan-out: used_memory sampled (`UsedMemory`), each and summed, and
    the calls of INFO commandstats summed over them, before and after (not reset: a delta)."""

    def __init__(self, cluster: ClusterStore) -> None:
        self.cluster = cluster
        self.nodes = [
            redis.Redis(host="127.0.0.1", port=port, decode_responses=True) for port in cluster.ports
        ]
        self.before = cluster.commandstats()
        self.memory = UsedMemory(self.nodes)

    def read(self, items: int) -> dict[str, Any]:
        """The `cluster_*` fields of a `Run`: MB, and commands per item (the probes' INFO left out)."""
        try:
            self.memory.stop()
        finally:
            for node in self.nodes:
                node.close()
        calls = self.cluster.commandstats() - self.before
        spent = sum(n for name, n in calls.items() if name not in HARNESS_COMMANDS)
        return {
            "cluster_peak_mb": round(self.memory.sum_peak / MB, 1),
            "cluster_node_peaks_mb": [round(peak / MB, 1) for peak in self.memory.peaks],
            "cluster_calls_per_item": round(spent / items, 1),
        }


def _run(side: str, f: FanOut, worker_pid: int) -> Run:
    """The timing and the memory figures of one fan-out, read while the worker is still up."""
    pid = f.join_pid
    pool = memory.group_peaks(worker_pid)
    main = pool.pop(worker_pid, None)
    return Run(
        f.items,
        side,
        round(f.seconds, 4),
        round(f.submit_seconds, 4),
        pid,
        "?" if pid is None else memory.role(pid, worker_pid),
        None if pid is None else memory.peak_mb(pid),
        max(pool.values()) if pool else None,
        main,
    )


def measure(bench: Bench) -> list[dict[str, Any]]:
    """Every size, every repeat, a fresh worker each time, the two sides' order alternating."""
    results = report.Results()
    runs: list[Run] = []
    for rep in range(bench.args.repeat):
        for size in bench.args.sizes:
            ordered = sides(bench)
            for side in ordered if rep % 2 == 0 else reversed(ordered):
                say(f"repeat {rep + 1}/{bench.args.repeat}: {side.name} worker, {size} items")
                run_side(bench, side, size, results, runs)
    return rows(results, runs, bench.args.prefetch)


def rows(results: report.Results, runs: list[Run], prefetch: int) -> list[dict[str, Any]]:
    """Rates, median, ratio to the chord, the target and the VmHWM figures, per (size, side)."""
    found = []
    for _, scenario, side in results.cells():
        ratio = None if side == report.BASELINE else results.ratio(prefetch, scenario, side)
        mine = [r for r in runs if (str(r.size), r.side) == (scenario, side)]
        found.append(
            {
                "size": int(scenario),
                "side": side,
                "rates": [round(r, 1) for r in results.rates(prefetch, scenario, side)],
                "median": round(results.median(prefetch, scenario, side) or 0.0, 1),
                "ratio": None if ratio is None else round(ratio, 3),
                "target": None if side == report.BASELINE else TARGET,
                "met": None if ratio is None else ratio >= TARGET,
                "join_peak_mb": _max(r.join_peak_mb for r in mine),
                "join_roles": sorted({r.join_role for r in mine}),
                "pool_peak_mb": _max(r.pool_peak_mb for r in mine),
                "main_peak_mb": _max(r.main_peak_mb for r in mine),
                "redis_peak_mb": _max(r.redis_peak_mb for r in mine),
                "calls_per_item": _max(r.calls_per_item for r in mine),
                **cluster_cells(mine),
                "runs": [asdict(r) for r in mine],
            }
        )
    return found


def cluster_cells(runs: list[Run]) -> dict[str, float | None]:
    """The cluster's figures of a row: the largest memory and calls per item, the median CPU per item."""
    cpu = [r.cpu_us_per_item["cluster"] for r in runs if "cluster" in r.cpu_us_per_item]
    return {
        "cluster_peak_mb": _max(r.cluster_peak_mb for r in runs),
        "cluster_calls_per_item": _max(r.cluster_calls_per_item for r in runs),
        "cluster_cpu_us_per_item": round(statistics.median(cpu), 1) if cpu else None,
    }


def _max(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


HEAD = (
    "size",
    "side",
    "items/s (median)",
    "ratio",
    f"target >= {TARGET:.2f}x",
    "join pid VmHWM MB",
    "pool max VmHWM MB",
    "main VmHWM MB",
    "Redis max MB (sampled)",
    "Redis calls/item",
)
CLUSTER_HEAD = ("cluster max MB (sampled, sum)", "cluster calls/item", "cluster CPU us/item")


def table(records: list[dict[str, Any]], clustered: bool = False) -> str:
    """The records as an aligned text table; with a cluster, its three columns too."""
    head = (*HEAD, *(CLUSTER_HEAD if clustered else ()), "each run (items/s)")
    body = [
        (*_cells(r), *(_cluster_cells(r) if clustered else ()), ", ".join(f"{x:.0f}" for x in r["rates"]))
        for r in records
    ]
    return report.align([head, *body])


def _cells(r: dict[str, Any]) -> tuple[str, ...]:
    return (
        str(r["size"]),
        r["side"],
        f"{r['median']:.0f}",
        "" if r["ratio"] is None else f"{r['ratio']:.2f}x",
        "" if r["met"] is None else ("met" if r["met"] else "NOT met"),
        _mb(r["join_peak_mb"], f" ({'/'.join(r['join_roles'])})"),
        _mb(r["pool_peak_mb"]),
        _mb(r["main_peak_mb"]),
        _mb(r["redis_peak_mb"]),
        _mb(r["calls_per_item"]),
    )


def _cluster_cells(r: dict[str, Any]) -> tuple[str, ...]:
    return _mb(r["cluster_peak_mb"]), _mb(r["cluster_calls_per_item"]), _mb(r["cluster_cpu_us_per_item"])


def _mb(value: float | None, suffix: str = "") -> str:
    return "-" if value is None else f"{value:.1f}{suffix}"


def notes(records: list[dict[str, Any]], clustered: bool = False) -> list[str]:
    """What the memory columns mean, and a warning when the join pid is not a pool process."""
    lines = [
        "VmHWM: peak resident memory over a process's whole life, read right after the join; each "
        f"worker runs only a warm-up ({WARM_UP} items) before the timed fan-out, so the figure is that "
        "fan-out's peak (or the process's earlier peak, if higher).",
        "join pid: the chord body's pool process / the process named by the `worker` field of the run's "
        "last transcript record (pool = a prefork pool process, main = the worker's main process). "
        "pool max: the largest VmHWM among the worker's pool processes, the join's among them.",
    ]
    if clustered:
        lines.append(
            "Redis: the private Redis (the chord's broker, state and results; graphrunner's broker). "
            "cluster (graphrunner only): used_memory sampled every 0.2 s, summed over the masters, its "
            "maximum (each master's in the JSON); INFO commandstats calls summed over the masters, after "
            "minus before the fan-out, INFO left out; CPU of all nodes together."
        )
    if any(role != "pool" for r in records if r["side"] == GRAPHRUNNER for role in r["join_roles"]):
        lines.append(
            "warning: graphrunner's transcript names a process that is not a pool process (main: the "
            "worker's own process) as the worker of the join step, so 'join pid VmHWM' is not the join's "
            "memory for graphrunner; 'pool max' bounds it from above."
        )
    return lines


def show(figures: dict[str, Any]) -> None:
    """Print the store and topology lines, the table and its notes on stdout."""
    clustered = figures["store"]["kind"] == "cluster"
    print(store_line(figures["store"]))
    for line in topology.lines(figures):
        print(line)
    print(table(figures["rows"], clustered))
    for line in notes(figures["rows"], clustered):
        print(line)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; print the table (and the JSON line with --json)."""
    args = parse_args(argv)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = check_quiet()
    if not memory.is_available():
        say("no /proc here: the VmHWM figures will be missing")
    with (
        terminate_as_exit(),
        EmbeddedRedis() as server,
        cluster_for(args.store) as cluster,
        topology.started(args, server.url) as topo,
    ):
        announce(server, cluster, topo)
        bench = Bench(server, args, cluster, topology=topo)
        records = measure(bench)
        env = environment(server.url, topo)
    env["load_average"] = {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]}
    figures = {"store": store_facts(bench), **topo.facts(), "rows": records}
    show(figures)
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k != "json"}
        print(json.dumps({"date": started, "settings": settings, "environment": env, **figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
