"""Submit-to-result latency of a 3-node graph on a warm graphrunner worker, one run at a time,
against the same number of hops of bare Celery, blocks of runs interleaved.

    python -m benchmarks.latency [--runs 200] [--warm-up 20] [--block 10] [--json]

One graphrunner worker (prefork, `-c 2`, prefetch 1) on a private Redis; each run of
`bench/three-nodes` (gate, echo, return) is submitted once the previous one has finished. Each
run is timed from just before `Client.submit` two ways: until `RunHandle.wait()` returns
(client-observed) and until the run's final commit (`updated_at` of its record, ms).

The reference, on the same Redis with the same worker settings: a chain of three `bench.step`
tasks of the bare Celery baseline (`baseline.py`, unchanged), timed from just before
`send_task` to the time the third task wrote into its state (commit-based). Both workers run
throughout; blocks of `--block` runs alternate (bare, graphrunner, graphrunner, bare, ...), so
the load of a shared machine weighs on both sides alike. The verdict: client-observed p50 over
bare Celery's p50, at most 1.00. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, closing
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Generic, TypeVar

from benchmarks import baseline, graphs, report
from benchmarks.drivers import poll_client
from benchmarks.processes import Worker, running_worker, terminate_as_exit
from benchmarks.steps import Bench, baseline_phase, check_quiet, environment, graphrunner_phase, say
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis
from graphrunner.graph import Graph
from graphrunner.settings import Settings
from graphrunner.store.keys import KeySpace

TARGET_P50_MS = 5.0  # DESIGN §9: a 3-node graph on a warm cluster, submit to result, median
PERCENTILES = (50, 90, 99)
FIRST_RUN_TIMEOUT = 60.0  # seconds: the first warm-up run also waits for the worker to start
HOPS = 3  # tasks in the bare Celery reference chain: one per node of the graph
T = TypeVar("T")
OURS, BARE = "graphrunner", "bare Celery"
BLOCK = 10  # runs in a row on one side before the other side's turn
TARGET_RATIO = 1.0  # issue 27: client-observed p50 at most bare Celery's three hops (commit-based)
BASELINE = "baseline_ms"
BASELINE_LABEL = "bare Celery, 3 hops (send -> third task's write)"
MEASURES = {
    "client_ms": "client-observed (submit -> wait() returns)",
    "commit_ms": "commit-based (submit -> final commit, updated_at)",
    "submit_ms": "submit() call alone (informational)",
    "after_commit_ms": "wait() after the final commit (client - commit)",
}


@dataclass(frozen=True)
class Sample:
    """One run's latencies in milliseconds, all from just before `Client.submit`; `after_commit_ms`
    is what the client took past the final commit (up to 1 ms high: `updated_at` is truncated)."""

    client_ms: float
    commit_ms: float
    submit_ms: float

    @property
    def after_commit_ms(self) -> float:
        return self.client_ms - self.commit_ms


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.latency", description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=200, help="timed runs, one at a time")
    p.add_argument("--warm-up", type=int, default=20, help="runs before the timed ones (not reported)")
    p.add_argument("--block", type=int, default=BLOCK, help="runs in a row on one side (sides alternate)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds one run may take")
    p.add_argument("--prefetch", type=int, default=1, help="worker prefetch multiplier")
    p.add_argument("--concurrency", type=int, default=2, help="prefork processes of the worker")
    p.add_argument("--loglevel", default="WARNING", help="worker log level")
    p.add_argument(
        "--no-baseline",
        dest="baseline",
        action="store_false",
        help="skip the bare Celery three-hop reference",
    )
    p.add_argument("--json", action="store_true", help="also print every figure as one JSON line")
    args = p.parse_args(argv)
    if args.runs < 1 or args.warm_up < 0 or args.block < 1:
        p.error("--runs and --block must be at least 1 and --warm-up not negative")
    return args


class LatencyDriver:
    """Submits runs of the 3-node graph through the public `Client` and times each to its result."""

    def __init__(self, url: str, prefetch: int) -> None:
        settings = Settings(redis_url=url, prefetch=prefetch, quiet=True)
        self.client = Client(settings=settings)
        self.graph: Graph = graphs.load_three_nodes(settings)
        self.poll = poll_client(url)

    def run(self, timeout: float) -> Sample:
        """Submit one run, wait for its result, check it, and return its latencies."""
        started = time.time()
        began = time.perf_counter()
        handle = self.client.submit(self.graph)
        submitted = time.perf_counter()
        result = handle.wait(timeout)
        observed = time.perf_counter()
        if result.status != "completed" or result.output != graphs.THREE_NODES_OUTPUT:
            raise RuntimeError(f"run {handle.id} ended {result.status} with output {result.output!r}")
        if result.step_count != graphs.THREE_NODES_STEPS:
            raise RuntimeError(f"run {handle.id} took {result.step_count} steps, expected 3")
        return Sample(
            client_ms=(observed - began) * 1000,
            commit_ms=self._committed_ms(handle.id) - started * 1000,
            submit_ms=(submitted - began) * 1000,
        )

    def _committed_ms(self, run_id: str) -> int:
        """The run's final commit time: `updated_at` of its record (epoch ms, worker's clock)."""
        return int(self.poll.hget(KeySpace().run(run_id), "updated_at") or 0)

    def close(self) -> None:
        """Release the driver's connections."""
        self.client.close()
        self.poll.close()


class BaselineLatencyDriver:
    """Sends a three-task chain of the bare Celery baseline and times it to its last write."""

    def __init__(self, url: str) -> None:
        self.app = baseline.create_app(url)
        self.poll = poll_client(url)
        self.key = baseline.state_key("latency")

    def run(self, timeout: float) -> float:
        """One chain of `HOPS` tasks; milliseconds from just before the send to the last task's write."""
        self.poll.set(self.key, json.dumps({"n": 0, "t": 0.0}))
        started = time.time()
        self.app.send_task(baseline.TASK_NAME, args=[self.key, HOPS], queue=baseline.QUEUE)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = json.loads(self.poll.get(self.key) or "{}")
            if state.get("n") == HOPS:
                return (float(state["t"]) - started) * 1000
            time.sleep(0.0005)
        raise TimeoutError(f"the baseline chain did not finish within {timeout:g}s")

    def close(self) -> None:
        """Release the driver's connections."""
        self.app.close()
        self.poll.close()


def percentile(values: Sequence[float], p: float) -> float:
    """The nearest-rank `p`th percentile of `values`."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def summary(values: Sequence[float]) -> dict[str, float]:
    """p50, p90, p99 and max of `values`, rounded to 0.01 ms."""
    found = {f"p{p}": percentile(values, p) for p in PERCENTILES}
    return {k: round(v, 2) for k, v in {**found, "max": max(values)}.items()}


def timed(what: str, run: Callable[[float], T], worker: Worker, n: int, timeout: float) -> T:
    """Run `n` (0-based) of a side; a failure says which and carries the worker's log."""
    try:
        return run(timeout)
    except Exception as exc:
        worker.check_alive()
        raise RuntimeError(f"{what} {n + 1}: {exc}; worker log:\n{worker.tail()}") from exc


def order(rounds: int) -> Iterator[str]:
    """The sides' blocks: bare, graphrunner, graphrunner, bare, bare, graphrunner, ..."""
    for r in range(rounds):
        yield from ((BARE, OURS) if r % 2 == 0 else (OURS, BARE))


class Side(Generic[T]):
    """One side of the comparison: its driver's `run`, its worker, and the latencies found."""

    def __init__(self, name: str, run: Callable[[float], T], worker: Worker) -> None:
        self.name, self.run, self.worker = name, run, worker
        self.found: list[T] = []

    def warm_up(self, runs: int, timeout: float) -> None:
        """`runs` runs not kept (the first also waits for the worker to start)."""
        for n in range(runs):
            first = FIRST_RUN_TIMEOUT if n == 0 else timeout
            timed(f"{self.name} warm-up run", self.run, self.worker, n, first)

    def block(self, runs: int, timeout: float) -> None:
        """`runs` more timed runs, one after another, kept."""
        for _ in range(runs):
            self.found.append(timed(f"{self.name} run", self.run, self.worker, len(self.found), timeout))


def interleaved(bench: Bench) -> tuple[list[Sample], list[float]]:
    """Start both workers (graphrunner's alone with --no-baseline), warm both up, then time
    `--runs` runs on each side in alternating blocks of `--block`; stop the workers."""
    args = bench.args
    with ExitStack() as stack:
        phase = graphrunner_phase(bench, args.prefetch, False)
        worker = stack.enter_context(running_worker(phase.name, phase.command, phase.env))
        driver = stack.enter_context(closing(LatencyDriver(bench.url, args.prefetch)))
        ours = Side(OURS, driver.run, worker)
        bare: Side[float] | None = None
        if args.baseline:
            phase = baseline_phase(bench, args.prefetch, False)
            worker = stack.enter_context(running_worker(phase.name, phase.command, phase.env))
            chains = stack.enter_context(closing(BaselineLatencyDriver(bench.url)))
            bare = Side(BARE, chains.run, worker)
        say(
            f"{args.warm_up} warm-up runs on each side, then {args.runs} timed runs each, one at a "
            f"time, in alternating blocks of {args.block}"
        )
        for side in (ours, bare):
            if side is not None:
                side.warm_up(args.warm_up, args.timeout)
        for name in order(math.ceil(args.runs / args.block)):
            side = ours if name == OURS else bare
            if side is not None:
                side.block(min(args.block, args.runs - len(side.found)), args.timeout)
        return ours.found, bare.found if bare else []


def figures(samples: list[Sample]) -> dict[str, dict[str, float]]:
    """The percentiles of each measure."""
    return {name: summary([getattr(s, name) for s in samples]) for name in MEASURES}


def ratios(stats: dict[str, dict[str, float]]) -> dict[str, float]:
    """The p50 of client-observed and commit-based over bare Celery's three hops' ({} without it)."""
    if BASELINE not in stats:
        return {}
    bare = stats[BASELINE]["p50"]
    return {name: round(stats[name]["p50"] / bare, 3) for name in ("client_ms", "commit_ms")}


def show(stats: dict[str, dict[str, float]], runs: int, block: int) -> None:
    """Print the percentile table and the verdicts on stdout."""
    how = "one at a time"
    if BASELINE in stats:
        how = f"a side {how}, sides alternating every {block} runs"
    print(f"submit to result, 3-node graph (gate -> echo -> return), {runs} runs {how} (ms)")
    head = ("measure", *(f"p{p}" for p in PERCENTILES), "max")
    labels = {**MEASURES, BASELINE: BASELINE_LABEL}
    body = [(labels[name], *(f"{v:.2f}" for v in values.values())) for name, values in stats.items()]
    print(report.align([head, *body]))
    found = ratios(stats)
    if found:
        print(f"\np50 over bare Celery's three hops ({stats[BASELINE]['p50']:.2f} ms):")
        for name, ratio in found.items():
            line = f"  {MEASURES[name].split(' (')[0]:16} {ratio:5.2f}x"
            if name == "client_ms":
                line += f"  target <= {TARGET_RATIO:.2f}x: {'met' if ratio <= TARGET_RATIO else 'NOT MET'}"
            print(line)
    print(f"\nDESIGN §9 target: submit to result, median <= {TARGET_P50_MS:g} ms")
    for name in ("client_ms", "commit_ms"):
        p50 = stats[name]["p50"]
        verdict = "met" if p50 <= TARGET_P50_MS else "NOT MET"
        print(f"  {MEASURES[name].split(' (')[0]:16} p50 {p50:6.2f} ms: {verdict}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the latency benchmark; print the table, the verdict (and the JSON line with --json)."""
    args = parse_args(argv)
    args.graphs = []  # graphrunner_phase's loop drivers are not used here
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = check_quiet()
    with terminate_as_exit(), EmbeddedRedis() as server:
        say(f"private Redis at {server.url}")
        bench = Bench(server, args)
        samples, reference = interleaved(bench)
        env = environment(server.url)
    env["load_average"] = {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]}
    stats = figures(samples)
    if reference:
        stats[BASELINE] = summary(reference)
    show(stats, len(samples), args.block)
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k not in ("json", "graphs")}
        record = {"date": started, "settings": settings, "environment": env, "percentiles": stats}
        record["ratios"] = ratios(stats)
        print(json.dumps({**record, "samples": [asdict(s) for s in samples], "baseline": reference}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
