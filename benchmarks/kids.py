"""Items per second and the parent's record size of a foreach over a graph (one child run per item),
against graphrunner's own parallel action foreach of the same size.

    python -m benchmarks.kids [--items 1000] [--max-concurrency 8,100,1000] [--repeat 2] [--json]

See benchmarks/README.md ("kids") for what it times and how to read the output.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis

from benchmarks import graphs, report
from benchmarks.processes import Worker, running_worker, terminate_as_exit
from benchmarks.record_probe import Probe, command_calls, without_probe
from benchmarks.steps import Bench, check_quiet, environment, graphrunner_phase, say
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis
from graphrunner.errors import WaitTimeout
from graphrunner.graph import Graph
from graphrunner.loading import parse_graph
from graphrunner.results import RunResult
from graphrunner.settings import Settings
from graphrunner.store.keys import KeySpace

ACTION = "action"  # the reference side: graphrunner's parallel action foreach (an echo per item)
KIDS = "kids"
WARM_UP = 50  # items of one run of the same graph each worker takes before the timed run
MIN_RATE = 5  # items/s below which a run is called stuck (plus 60 s)

# The child graphs: one step each, a small output (the child's whole state, {"i": <item>}).
CHILDREN = {
    "echo": """
id: bench-kid-echo
description: One echo action per item; its output is its state, {i}
inputs:
  n: {type: integer, required: true}
state:
  i: {type: integer, default: 0}
config:
  start: echo
nodes:
  echo:
    action: {tool: echo, params: {i: "${inputs.n}"}}
    assign: {i: "${result.i}"}
    next: $end
""",
    "gate": """
id: bench-kid-gate
description: One gate per item; its output is its state, {i}
inputs:
  n: {type: integer, required: true}
state:
  i: {type: integer, default: 0}
config:
  start: set
nodes:
  set:
    type: gate
    assign: {i: "${inputs.n}"}
    next: $end
""",
}

PARENT = """
id: bench/kids-fanout-{window}
version: "1"
description: One foreach over a graph, a child run per item, the outputs collected into state.results
inputs:
  items: {{type: list, required: true}}
state:
  results: {{type: list, default: [], reducer: last_write_wins}}
config:
  start: fan_out
nodes:
  fan_out:
    type: foreach
    over: "${{inputs.items}}"
    parallel: true
    max_concurrency: {window}
    graph: bench-kid-{child}
    inputs: {{n: "${{item}}"}}
    collect: results
    next: $end
"""


@dataclass(frozen=True)
class Cell:
    """One side: the kids with one max_concurrency, or the action foreach (window 0)."""

    side: str
    window: int

    @property
    def label(self) -> str:
        """`kids/8`, ..., or `action`."""
        return f"{KIDS}/{self.window}" if self.side == KIDS else ACTION


@dataclass(frozen=True)
class Run:
    """One timed run and what the probe saw while it went on."""

    label: str
    items: int
    seconds: float
    submit_seconds: float
    samples: int
    record_max_bytes: int  # while the run was running (the foreach in flight)
    record_end_bytes: int  # after its last commit
    memory_usage_max: int
    memory_usage_end: int
    wait_max_bytes: int
    inputs_bytes: int
    biggest_fields: dict[str, int]
    queue_max: int
    unacked_max: int
    running_max: int
    open_max: int
    runs_created: int
    parent_phase_max: int  # commits that suspended the parent's step (the first window, then each refill)
    calls_per_item: float  # Redis commands from submit to the end, over the items (in-script included)
    commands: dict[str, float]  # per item, by command (at least 0.1 per item)

    @property
    def rate(self) -> float:
        """Items per second."""
        return self.items / self.seconds


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.kids", description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, default=1000, help="items of the foreach (child runs)")
    p.add_argument("--max-concurrency", default="8,100,1000", help="max_concurrency values of the kids")
    p.add_argument("--child", choices=sorted(CHILDREN), default="echo", help="the child graph's one step")
    p.add_argument("--repeat", type=int, default=2, help="interleaved repetitions (median reported)")
    p.add_argument("--interval", type=float, default=0.02, help="seconds between two probe samples")
    p.add_argument("--prefetch", type=int, default=1, help="worker prefetch multiplier")
    p.add_argument("--concurrency", type=int, default=2, help="prefork processes per worker")
    p.add_argument("--loglevel", default="WARNING", help="worker log level")
    p.add_argument("--no-action", action="store_true", help="skip the action foreach reference")
    p.add_argument("--json", action="store_true", help="also print every figure as one JSON line")
    args = p.parse_args(argv)
    args.max_concurrency = [int(x) for x in args.max_concurrency.split(",") if x]
    if args.items < 1 or not args.max_concurrency or min(args.max_concurrency) < 1:
        p.error("--items and --max-concurrency need positive numbers")
    args.graphs = []  # what benchmarks.steps' phases expect (no loop drivers here)
    return args


class KidsDriver:
    """Submit one run of a graph over `items` items, probe it, time it to its last commit."""

    def __init__(self, url: str, prefetch: int, folder: Path, interval: float) -> None:
        self.url, self.interval = url, interval
        self.settings = Settings(redis_url=url, prefetch=prefetch, quiet=True, graph_path=(folder,))
        self.client = Client(settings=self.settings)

    def graph(self, cell: Cell, child: str) -> Graph:
        """The parent graph of `cell`: a foreach over the child graph, or over an echo action."""
        if cell.side == ACTION:
            return graphs.load_foreach(self.settings)
        text = PARENT.format(window=cell.window, child=child)
        return parse_graph(text, file=f"<bench:kids-{cell.window}>", settings=self.settings)

    def run(self, cell: Cell, graph: Graph, items: int, timeout: float) -> Run:
        """Submit, probe until the run has finished, check it, and gather the figures."""
        created = self._runs()
        calls = command_calls(self.redis)
        started = time.time()
        handle = self.client.submit(graph, {"items": list(range(items))})
        submitted = time.time()
        probe = Probe(self.url, handle.id, self.settings.queue, self.interval)
        probe.start()
        try:
            result = handle.wait(timeout)
        except WaitTimeout as exc:
            raise TimeoutError(f"run {handle.id} ({cell.label}) did not finish in {timeout:.0f} s") from exc
        finally:
            probe.stop()
        delta = without_probe(command_calls(self.redis) - calls, len(probe.samples))
        _check(result, items)
        during, final = probe.during(), probe.final()
        biggest = probe.biggest()
        if biggest is None or final is None:
            raise RuntimeError(f"run {handle.id} ({cell.label}) finished before the probe saw it running")
        return Run(
            cell.label,
            items,
            round(self._committed(graph.id, handle.id, time.time()) - started, 4),
            round(submitted - started, 4),
            len(during),
            biggest.record_bytes,
            final.record_bytes,
            probe.peak("memory_usage", during),
            final.memory_usage,
            probe.peak("wait_bytes", during),
            biggest.inputs_bytes,
            biggest.fields,
            probe.peak("queue"),
            probe.peak("unacked"),
            max(0, probe.peak("running") - 1),  # the parent is running too
            probe.peak("open_kids", during),
            self._runs() - created - 1,  # the kids (0 for the action foreach)
            probe.peak("phase", during),
            round(delta.total() / items, 2),
            {name: round(n / items, 2) for name, n in delta.most_common() if n / items >= 0.1},
        )

    @property
    def redis(self) -> redis.Redis:
        """The client's own connection to the private Redis."""
        client: redis.Redis = self.client.store.redis  # type: ignore[attr-defined]
        return client

    def _runs(self) -> int:
        """How many runs the store holds (every status)."""
        return int(self.redis.zcard(KeySpace().shards[0].index_all()))

    def _committed(self, graph_id: str, run_id: str, fallback: float) -> float:
        """The run's last commit time (its `updated_at`), or `fallback` if it is not listed."""
        for run in self.client.list_runs(graph_id=graph_id, limit=20):
            if run.run_id == run_id:
                return run.updated_at / 1000
        return fallback

    def close(self) -> None:
        """Release the client's connections."""
        self.client.close()


def _check(result: RunResult, items: int) -> None:
    """Raise unless the run completed with one collected result per item, in item order."""
    collected = result.state.get("results")
    count = len(collected) if isinstance(collected, list) else None
    ok = result.status == "completed" and count == items
    if ok and isinstance(collected, list):
        ok = all(_item_of(r) == i for i, r in enumerate(collected))
    if not ok:
        raise RuntimeError(
            f"run {result.run_id} ended {result.status} with {count} results, expected completed with "
            f"{items} in item order; error: {result.error}"
        )


def _item_of(result: Any) -> Any:
    """The item a collected result was made from: the kid's output {i} or the echo's {i}."""
    return result.get("i") if isinstance(result, dict) else None


def cells(args: argparse.Namespace) -> list[Cell]:
    """Every side: the kids at each max_concurrency, then the action foreach."""
    found = [Cell(KIDS, w) for w in args.max_concurrency]
    return found if args.no_action else [*found, Cell(ACTION, 0)]


def run_cell(bench: Bench, folder: Path, cell: Cell) -> Run:
    """A fresh worker: one warm-up run of the same graph, then the timed one."""
    args = bench.args
    phase = graphrunner_phase(bench, args.prefetch, False)
    with running_worker(phase.name, phase.command, phase.env) as worker:
        driver = KidsDriver(bench.url, args.prefetch, folder, args.interval)
        try:
            graph = driver.graph(cell, args.child)
            timed(driver, cell, graph, WARM_UP, worker)
            run = timed(driver, cell, graph, args.items, worker)
        finally:
            driver.close()
    say(
        f"{cell.label:10} {run.items} items: {run.rate:7.1f} items/s ({run.seconds:.2f} s); record max "
        f"{run.record_max_bytes} B, end {run.record_end_bytes} B; queue max {run.queue_max}, unacked max "
        f"{run.unacked_max}, kids running max {run.running_max}, kids created {run.runs_created}"
    )
    return run


def timed(driver: KidsDriver, cell: Cell, graph: Graph, items: int, worker: Worker) -> Run:
    """One run; a stuck one shows the worker's log."""
    try:
        return driver.run(cell, graph, items, 60 + items / MIN_RATE)
    except TimeoutError as exc:
        worker.check_alive()
        raise TimeoutError(f"{exc}; worker log:\n{worker.tail()}") from exc


def measure(bench: Bench, folder: Path) -> list[Run]:
    """Every cell, every repeat, a fresh worker each time; the order reverses from repeat to repeat."""
    runs: list[Run] = []
    ordered = cells(bench.args)
    for rep in range(bench.args.repeat):
        for cell in ordered if rep % 2 == 0 else reversed(ordered):
            say(f"repeat {rep + 1}/{bench.args.repeat}: {cell.label}, {bench.args.items} items")
            runs.append(run_cell(bench, folder, cell))
    return runs


PEAKS = (
    "record_max_bytes",
    "record_end_bytes",
    "memory_usage_max",
    "memory_usage_end",
    "wait_max_bytes",
    "inputs_bytes",
    "queue_max",
    "unacked_max",
    "running_max",
    "open_max",
    "parent_phase_max",
)


def rows(runs: list[Run], labels: list[str]) -> list[dict[str, Any]]:
    """Per side: the rates, their median, the ratio to the action foreach, and the probe's peaks
    (the largest over the repeats)."""
    medians = {label: statistics.median(r.rate for r in runs if r.label == label) for label in labels}
    reference = medians.get(ACTION)
    found = []
    for label in labels:
        mine = [r for r in runs if r.label == label]
        found.append(
            {
                "side": label,
                "items": mine[0].items,
                "rates": [round(r.rate, 1) for r in mine],
                "median": round(medians[label], 1),
                "vs_action": round(medians[label] / reference, 3) if reference else None,
                **{name: max(getattr(r, name) for r in mine) for name in PEAKS},
                "calls_per_item": round(statistics.median(r.calls_per_item for r in mine), 2),
                "commands": _median_commands([r.commands for r in mine]),
                "runs": [{**asdict(r), "rate": round(r.rate, 1)} for r in mine],
            }
        )
    return found


def _median_commands(runs: list[dict[str, float]]) -> dict[str, float]:
    """The median calls per item of each command over the runs (0 where a run did not list it)."""
    names = dict.fromkeys(name for commands in runs for name in commands)
    found = {name: round(statistics.median(c.get(name, 0.0) for c in runs), 2) for name in names}
    return dict(sorted(found.items(), key=lambda kv: -kv[1]))


def calls_table(records: list[dict[str, Any]]) -> str:
    """Redis commands per item (medians), and how often the parent's step was suspended again."""
    head = ("side", "calls/item", "by command (per item)", "parent suspensions")
    body = [
        (
            r["side"],
            f"{r['calls_per_item']:.1f}",
            ", ".join(f"{name} {n:g}" for name, n in list(r["commands"].items())[:8]),
            str(r["parent_phase_max"]),
        )
        for r in records
    ]
    return report.align([head, *body])


def rate_table(records: list[dict[str, Any]]) -> str:
    """Items/s, the ratio to the action foreach, and what was in flight at most."""
    head = (
        "side",
        "items/s (median)",
        "vs action",
        "queue max",
        "unacked max",
        "kids running max",
        "kids open max",
        "each run (items/s)",
    )
    body = [
        (
            r["side"],
            f"{r['median']:.1f}",
            "" if r["vs_action"] is None or r["side"] == ACTION else f"{r['vs_action']:.2f}x",
            str(r["queue_max"]),
            str(r["unacked_max"]),
            "-" if r["side"] == ACTION else str(r["running_max"]),
            "-" if r["side"] == ACTION else str(r["open_max"]),
            ", ".join(f"{x:.1f}" for x in r["rates"]),
        )
        for r in records
    ]
    return report.align([head, *body])


def record_table(records: list[dict[str, Any]]) -> str:
    """The parent's record: largest while the foreach runs, and after the last commit (bytes)."""
    head = (
        "side",
        "record max (running)",
        "of which wait",
        "of which inputs",
        "MEMORY USAGE max",
        "record end",
        "MEMORY USAGE end",
    )
    body = [
        (
            r["side"],
            str(r["record_max_bytes"]),
            str(r["wait_max_bytes"]),
            str(r["inputs_bytes"]),
            str(r["memory_usage_max"]),
            str(r["record_end_bytes"]),
            str(r["memory_usage_end"]),
        )
        for r in records
    ]
    return report.align([head, *body])


def field_lines(runs: list[Run]) -> list[str]:
    """Per side, the record's fields at its biggest sample (of the run with the biggest record)."""
    lines = ["the parent's record at its biggest, by field (name + value bytes):"]
    for label in dict.fromkeys(r.label for r in runs):
        run = max((r for r in runs if r.label == label), key=lambda r: r.record_max_bytes)
        top = sorted(run.biggest_fields.items(), key=lambda kv: -kv[1])
        lines.append(f"  {label:10} " + ", ".join(f"{k} {v}" for k, v in top))
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; print the table (and the JSON line with --json)."""
    args = parse_args(argv)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = check_quiet()
    with (
        terminate_as_exit(),
        tempfile.TemporaryDirectory(prefix="bench-kids-") as tmp,
        EmbeddedRedis() as server,
    ):
        folder = Path(tmp)
        for name, text in CHILDREN.items():
            (folder / f"bench-kid-{name}.yaml").write_text(text)
        say(f"private Redis at {server.url}")
        runs = measure(Bench(server, args), folder)
        env = environment(server.url)
    env["load_average"] = {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]}
    records = rows(runs, [c.label for c in cells(args)])
    print(
        f"{args.items} items, child graph: one {args.child} step; {args.repeat} repeat(s), "
        "a fresh worker each run"
    )
    print(rate_table(records))
    print()
    print("the parent's run record in Redis (bytes; field names + values, and MEMORY USAGE of the key)")
    print(record_table(records))
    print()
    print(
        "Redis commands per item, submit to end (INFO commandstats: in-script ones included, the probe's not)"
    )
    print(calls_table(records))
    for line in field_lines(runs):
        print(line)
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k not in ("json", "graphs")}
        print(json.dumps({"date": started, "settings": settings, "environment": env, "rows": records}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
