"""Children per second of a foreach over a graph (one child run per item) against a bare Celery
chord of chains with as many tasks per chain as each child run takes steps (issue 27), and the
parent's record and the queue while it runs.

    python -m benchmarks.kids [--sizes 1000,10000] [--max-concurrency 1000] [--repeat 2] [--json]

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
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from celery import chain, chord

from benchmarks import baseline, baseline_chord, graphs, report
from benchmarks.cpu import CpuProbe, per_step
from benchmarks.fanout import ChordDriver
from benchmarks.processes import Worker, running_worker, terminate_as_exit
from benchmarks.record_probe import Probe, command_calls, without_probe
from benchmarks.steps import Bench, Phase, baseline_phase, check_quiet, environment, graphrunner_phase, say
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis
from graphrunner.errors import WaitTimeout
from graphrunner.graph import Graph
from graphrunner.loading import parse_graph
from graphrunner.results import RunResult
from graphrunner.settings import Settings
from graphrunner.store.keys import KeySpace

CHORD = report.BASELINE  # the reference: a bare Celery chord of N chains of k no-op tasks
ACTION = "action"  # graphrunner's own parallel action foreach (an echo per item), for context
KIDS = "kids"
TARGET = 0.8  # kids children/s over the chord's chains/s, per size (DESIGN §9, issue 27)
WARM_UP = 50  # items (children, chains) of one fan-out each worker takes before the timed one
MIN_RATE = 5  # items/s below which a run is called stuck (plus 60 s)
CAPABILITIES = ("tool:echo", "graph:bench-kid-*")  # what the runs may do (kids inherit them)

# One node of a child graph: an echo action, or a gate; each writes the item into `i`.
NODES = {
    "echo": """
  s{n}:
    action: {{tool: echo, params: {{i: "${{inputs.n}}"}}}}
    assign: {{i: "${{result.i}}"}}
    next: {next}""",
    "gate": """
  s{n}:
    type: gate
    assign: {{i: "${{inputs.n}}"}}
    next: {next}""",
}
CHILD = """
id: bench-kid-{kind}-{steps}
description: {steps} {kind} step(s) per item; its output is its state, {{i}}
inputs:
  n: {{type: integer, required: true}}
state:
  i: {{type: integer, default: 0}}
config:
  start: s1
nodes:{nodes}
"""

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
    graph: {child}
    inputs: {{n: "${{item}}"}}
    collect: results
    next: $end
"""


def child_graph(kind: str, steps: int) -> str:
    """A child graph of `steps` nodes of `kind` in a line: one step task each, `{i}` its output."""
    nodes = "".join(
        NODES[kind].format(n=n, next=f"s{n + 1}" if n < steps else "$end") for n in range(1, steps + 1)
    )
    return CHILD.format(kind=kind, steps=steps, nodes=nodes)


@dataclass(frozen=True)
class Cell:
    """One side: the chord of chains, the kids at one max_concurrency, or the action foreach."""

    side: str
    window: int = 0

    @property
    def label(self) -> str:
        """`baseline`, `kids/1000`, ..., or `action`."""
        return f"{KIDS}/{self.window}" if self.side == KIDS else self.side


@dataclass(frozen=True)
class Run:
    """One timed fan-out and what the probe saw while it went on (the parent's record: kids, action)."""

    label: str
    items: int
    seconds: float
    submit_seconds: float
    queue_max: int
    unacked_max: int
    calls_per_item: float  # Redis commands from submit to the end, over the items (in-script included)
    commands: dict[str, float]  # per item, by command (at least 0.1 per item)
    samples: int = 0
    record_max_bytes: int = 0  # while the run was running (the foreach in flight)
    record_end_bytes: int = 0  # after its last commit
    memory_usage_max: int = 0
    memory_usage_end: int = 0
    wait_max_bytes: int = 0
    inputs_bytes: int = 0
    biggest_fields: dict[str, int] = field(default_factory=dict)
    running_max: int = 0
    open_max: int = 0
    runs_created: int = 0
    parent_phase_max: int = 0  # commits that suspended the parent's step (the first window, then refills)
    cpu: dict[str, float] = field(default_factory=dict)  # microseconds per item by process role

    @property
    def rate(self) -> float:
        """Items (children, chains) per second."""
        return self.items / self.seconds


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.kids", description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000,10000", help="children (chains) per fan-out, e.g. 1000,10000")
    p.add_argument(
        "--max-concurrency", default="1000", help="max_concurrency values of the kids, e.g. 8,1000"
    )
    p.add_argument("--child", choices=sorted(NODES), default="echo", help="the kind of the child's steps")
    p.add_argument("--child-steps", type=int, default=1, help="steps per child run (tasks per chain: k)")
    p.add_argument("--repeat", type=int, default=2, help="interleaved repetitions (median reported)")
    p.add_argument("--interval", type=float, default=0.02, help="seconds between two probe samples")
    p.add_argument("--prefetch", type=int, default=1, help="worker prefetch multiplier (every side)")
    p.add_argument("--concurrency", type=int, default=2, help="prefork processes per worker")
    p.add_argument("--loglevel", default="WARNING", help="worker log level")
    p.add_argument("--no-action", action="store_true", help="skip graphrunner's action foreach (context)")
    p.add_argument("--no-chord", action="store_true", help="skip the bare Celery chord of chains")
    p.add_argument("--json", action="store_true", help="also print every figure as one JSON line")
    args = p.parse_args(argv)
    args.sizes = sorted({int(x) for x in args.sizes.split(",") if x})
    args.max_concurrency = [int(x) for x in args.max_concurrency.split(",") if x]
    if not args.sizes or min(args.sizes) < 1 or not args.max_concurrency or min(args.max_concurrency) < 1:
        p.error("--sizes and --max-concurrency need positive numbers")
    if args.child_steps < 1:
        p.error("--child-steps needs a positive number")
    args.graphs = []  # what benchmarks.steps' phases expect (no loop drivers here)
    return args


class ChainChordDriver:
    """The bare Celery side: `chord([chain(part.si(i) x k) for i in range(N)], body)` on the unchanged
    baseline app (`bench.chord_part`, `bench.chord_body`), timed to the body's record."""

    def __init__(self, url: str, prefetch: int, steps: int, interval: float) -> None:
        self.url, self.steps, self.interval = url, steps, interval
        self.bare = ChordDriver(url, prefetch)  # the baseline app, its poll client, the body's wait
        self.app, self.poll = self.bare.app, self.bare.poll

    def run(self, items: int, timeout: float) -> Run:
        """Apply the chord; time from just before `apply_async` to the body's commit."""
        key = baseline_chord.done_key(uuid.uuid4().hex)
        part, body = self.app.tasks[baseline_chord.PART_NAME], self.app.tasks[baseline_chord.BODY_NAME]
        header = [self._chain(part, i) for i in range(items)]
        probe = Probe(self.url, "-", baseline.QUEUE, self.interval)  # the queue alone: no run record
        calls = command_calls(self.poll)
        started = time.time()
        probe.start()
        try:
            result = chord(header, body.s(key)).apply_async()
            submitted = time.time()
            done = self.bare.body_record(key, time.monotonic() + timeout)
        finally:
            probe.stop()
        delta = without_probe(command_calls(self.poll) - calls, len(probe.samples))
        result.forget()  # outside the timed window: the stored part results go while Redis is up
        if done["n"] != items:
            raise RuntimeError(f"chord body {key} joined {done['n']} results, expected {items}")
        return Run(
            CHORD,
            items,
            round(float(done["t"]) - started, 4),
            round(submitted - started, 4),
            probe.peak("queue"),
            probe.peak("unacked"),
            round(delta.total() / items, 2),
            {name: round(n / items, 2) for name, n in delta.most_common() if n / items >= 0.1},
        )

    def _chain(self, part: Any, i: int) -> Any:
        """One header entry: `k` no-op parts in a line (the part itself when k is 1)."""
        return part.si(i) if self.steps == 1 else chain(*(part.si(i) for _ in range(self.steps)))

    def close(self) -> None:
        """Release the driver's connections."""
        self.bare.close()


class KidsDriver:
    """Submit one run of a graph over `items` items, probe it, time it to its last commit."""

    def __init__(
        self, url: str, prefetch: int, folder: Path, interval: float, cell: Cell, child: str
    ) -> None:
        self.url, self.interval, self.cell = url, interval, cell
        self.settings = Settings(redis_url=url, prefetch=prefetch, quiet=True, graph_path=(folder,))
        self.client = Client(settings=self.settings)
        self.graph = self._graph(child)

    def _graph(self, child: str) -> Graph:
        """The parent graph: a foreach over the child graph, or over an echo action."""
        if self.cell.side == ACTION:
            return graphs.load_foreach(self.settings)
        text = PARENT.format(window=self.cell.window, child=child)
        return parse_graph(text, file=f"<bench:kids-{self.cell.window}>", settings=self.settings)

    def run(self, items: int, timeout: float) -> Run:
        """Submit, probe until the run has finished, check it, and gather the figures."""
        label = self.cell.label
        created = self._runs()
        calls = command_calls(self.redis)
        started = time.time()
        handle = self.client.submit(self.graph, {"items": list(range(items))}, capabilities=CAPABILITIES)
        submitted = time.time()
        probe = Probe(self.url, handle.id, self.settings.queue, self.interval)
        probe.start()
        try:
            result = handle.wait(timeout)
        except WaitTimeout as exc:
            raise TimeoutError(f"run {handle.id} ({label}) did not finish in {timeout:.0f} s") from exc
        finally:
            probe.stop()
        delta = without_probe(command_calls(self.redis) - calls, len(probe.samples))
        _check(result, items)
        during, final = probe.during(), probe.final()
        biggest = probe.biggest()
        if biggest is None or final is None:
            raise RuntimeError(f"run {handle.id} ({label}) finished before the probe saw it running")
        return Run(
            label,
            items,
            round(self._committed(handle.id, time.time()) - started, 4),
            round(submitted - started, 4),
            probe.peak("queue"),
            probe.peak("unacked"),
            round(delta.total() / items, 2),
            {name: round(n / items, 2) for name, n in delta.most_common() if n / items >= 0.1},
            len(during),
            biggest.record_bytes,
            final.record_bytes,
            probe.peak("memory_usage", during),
            final.memory_usage,
            probe.peak("wait_bytes", during),
            biggest.inputs_bytes,
            biggest.fields,
            max(0, probe.peak("running") - 1),  # the parent is running too
            probe.peak("open_kids", during),
            self._runs() - created - 1,  # the kids (0 for the action foreach)
            probe.peak("phase", during),
        )

    @property
    def redis(self) -> redis.Redis:
        """The client's own connection to the private Redis."""
        client: redis.Redis = self.client.store.redis  # type: ignore[attr-defined]
        return client

    def _runs(self) -> int:
        """How many runs the store holds (every status)."""
        return int(self.redis.zcard(KeySpace().shards[0].index_all()))

    def _committed(self, run_id: str, fallback: float) -> float:
        """The run's last commit time (its `updated_at`), or `fallback` if it is not listed."""
        for run in self.client.list_runs(graph_id=self.graph.id, limit=20):
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
    """Every side: the chord, the kids at each max_concurrency, the action foreach."""
    found = [] if args.no_chord else [Cell(CHORD)]
    found += [Cell(KIDS, w) for w in args.max_concurrency]
    return found if args.no_action else [*found, Cell(ACTION)]


def run_cell(bench: Bench, folder: Path, cell: Cell, size: int) -> Run:
    """A fresh worker: one warm-up fan-out of the same kind, then the timed one."""
    phase = _phase(bench, cell)
    with running_worker(phase.name, phase.command, phase.env) as worker:
        driver = _driver(bench, folder, cell)
        try:
            timed(driver, WARM_UP, worker)
            assert bench.server.process is not None
            cpu = CpuProbe(bench.server.process.pid, worker.process.pid)
            before = cpu.read()
            run = timed(driver, size, worker)
            run = replace(run, cpu=per_step(before, cpu.read(), size))
        finally:
            driver.close()
    kids = (
        f"; kids running max {run.running_max}, kids created {run.runs_created}" if cell.side == KIDS else ""
    )
    record = (
        f"; record max {run.record_max_bytes} B, end {run.record_end_bytes} B" if cell.side != CHORD else ""
    )
    say(
        f"{cell.label:10} {run.items} items: {run.rate:7.1f} items/s ({run.seconds:.2f} s){record}; queue "
        f"max {run.queue_max}, unacked max {run.unacked_max}{kids}; {run.calls_per_item} calls/item; CPU "
        f"per item: worker {run.cpu.get('worker', 0):.0f} us, Redis {run.cpu.get('redis', 0):.0f} us"
    )
    return run


def _phase(bench: Bench, cell: Cell) -> Phase:
    """The worker of `cell`: the bare baseline's for the chord, graphrunner's otherwise."""
    if cell.side == CHORD:
        return baseline_phase(bench, bench.args.prefetch, False)
    return graphrunner_phase(bench, bench.args.prefetch, False)


def _driver(bench: Bench, folder: Path, cell: Cell) -> ChainChordDriver | KidsDriver:
    """The driver of `cell`."""
    args = bench.args
    if cell.side == CHORD:
        return ChainChordDriver(bench.url, args.prefetch, args.child_steps, args.interval)
    child = f"bench-kid-{args.child}-{args.child_steps}"
    return KidsDriver(bench.url, args.prefetch, folder, args.interval, cell, child)


def timed(driver: ChainChordDriver | KidsDriver, items: int, worker: Worker) -> Run:
    """One fan-out; a stuck one shows the worker's log."""
    try:
        return driver.run(items, 60 + items / MIN_RATE)
    except TimeoutError as exc:
        worker.check_alive()
        raise TimeoutError(f"{exc}; worker log:\n{worker.tail()}") from exc


def measure(bench: Bench, folder: Path) -> list[Run]:
    """Every size, every cell, every repeat, a fresh worker each time; the sides' order reverses
    from one repeat to the next (chord, kids, action, then action, kids, chord, ...)."""
    runs: list[Run] = []
    ordered = cells(bench.args)
    for rep in range(bench.args.repeat):
        for size in bench.args.sizes:
            for cell in ordered if rep % 2 == 0 else reversed(ordered):
                say(f"repeat {rep + 1}/{bench.args.repeat}: {cell.label}, {size} items")
                runs.append(run_cell(bench, folder, cell, size))
    return runs


PEAKS = (
    "queue_max",
    "unacked_max",
    "record_max_bytes",
    "record_end_bytes",
    "memory_usage_max",
    "memory_usage_end",
    "wait_max_bytes",
    "inputs_bytes",
    "running_max",
    "open_max",
    "parent_phase_max",
)


def rows(runs: list[Run], labels: list[str]) -> list[dict[str, Any]]:
    """Per size and side: the rates, their median, the ratio to the chord (and the target), the
    ratio to the action foreach, and the probe's peaks (the largest over the repeats)."""
    found = []
    for size in sorted({r.items for r in runs}):
        medians = {
            label: statistics.median(r.rate for r in runs if (r.label, r.items) == (label, size))
            for label in labels
        }
        chord_rate, action_rate = medians.get(CHORD), medians.get(ACTION)
        for label in labels:
            mine = [r for r in runs if (r.label, r.items) == (label, size)]
            ratio = medians[label] / chord_rate if chord_rate and label != CHORD else None
            found.append(
                {
                    "size": size,
                    "side": label,
                    "rates": [round(r.rate, 1) for r in mine],
                    "median": round(medians[label], 1),
                    "vs_chord": None if ratio is None else round(ratio, 3),
                    "target": TARGET if label.startswith(KIDS) and ratio is not None else None,
                    "met": ratio >= TARGET if label.startswith(KIDS) and ratio is not None else None,
                    "vs_action": round(medians[label] / action_rate, 3)
                    if action_rate and label.startswith(KIDS)
                    else None,
                    **{name: max(getattr(r, name) for r in mine) for name in PEAKS},
                    "cpu_us": _median_cpu([r.cpu for r in mine]),
                    "calls_per_item": round(statistics.median(r.calls_per_item for r in mine), 2),
                    "commands": _median_commands([r.commands for r in mine]),
                    "runs": [{**asdict(r), "rate": round(r.rate, 1)} for r in mine],
                }
            )
    return found


def _median_cpu(runs: list[dict[str, float]]) -> dict[str, float]:
    """The median CPU microseconds per item of each process role over the runs."""
    roles = dict.fromkeys(role for cpu in runs for role in cpu)
    return {role: round(statistics.median(c[role] for c in runs if role in c), 1) for role in roles}


def _median_commands(runs: list[dict[str, float]]) -> dict[str, float]:
    """The median calls per item of each command over the runs (0 where a run did not list it)."""
    names = dict.fromkeys(name for commands in runs for name in commands)
    found = {name: round(statistics.median(c.get(name, 0.0) for c in runs), 2) for name in names}
    return dict(sorted(found.items(), key=lambda kv: -kv[1]))


def _ratio(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"


def rate_table(records: list[dict[str, Any]]) -> str:
    """Items/s, the ratio to the chord (target, met), to the action foreach, and what was in flight."""
    head = (
        "size",
        "side",
        "items/s (median)",
        "vs chord",
        f"target >= {TARGET:.2f}x",
        "vs action",
        "queue max",
        "unacked max",
        "kids running max",
        "kids open max",
        "each run (items/s)",
    )
    body = [
        (
            str(r["size"]),
            r["side"],
            f"{r['median']:.1f}",
            _ratio(r["vs_chord"]),
            "" if r["met"] is None else ("met" if r["met"] else "NOT met"),
            _ratio(r["vs_action"]),
            str(r["queue_max"]),
            str(r["unacked_max"]),
            str(r["running_max"]) if r["side"].startswith(KIDS) else "-",
            str(r["open_max"]) if r["side"].startswith(KIDS) else "-",
            ", ".join(f"{x:.1f}" for x in r["rates"]),
        )
        for r in records
    ]
    return report.align([head, *body])


def cpu_table(records: list[dict[str, Any]]) -> str:
    """CPU microseconds per item by process (medians): what bounds items/s on a busy machine."""
    head = ("size", "side", "worker main", "worker pool", "worker", "Redis", "worker + Redis", "vs chord")
    chord = {r["size"]: r["cpu_us"] for r in records if r["side"] == CHORD}

    def both(cpu: dict[str, float]) -> float:
        return cpu.get("worker", 0.0) + cpu.get("redis", 0.0)

    body = []
    for r in records:
        cpu, base = r["cpu_us"], chord.get(r["size"])
        ratio = both(cpu) / both(base) if base and both(base) and r["side"] != CHORD else None
        body.append(
            (
                str(r["size"]),
                r["side"],
                *(f"{cpu.get(k, 0.0):.0f}" for k in ("worker_main", "worker_pool", "worker", "redis")),
                f"{both(cpu):.0f}",
                _ratio(ratio),
            )
        )
    return report.align([head, *body])


def record_table(records: list[dict[str, Any]]) -> str:
    """The parent's record: largest while the foreach runs, and after the last commit (bytes)."""
    head = (
        "size",
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
            str(r["size"]),
            r["side"],
            str(r["record_max_bytes"]),
            str(r["wait_max_bytes"]),
            str(r["inputs_bytes"]),
            str(r["memory_usage_max"]),
            str(r["record_end_bytes"]),
            str(r["memory_usage_end"]),
        )
        for r in records
        if r["side"] != CHORD
    ]
    return report.align([head, *body])


def calls_table(records: list[dict[str, Any]]) -> str:
    """Redis commands per item (medians), and how often the parent's step was suspended again."""
    head = ("size", "side", "calls/item", "by command (per item)", "parent suspensions")
    body = [
        (
            str(r["size"]),
            r["side"],
            f"{r['calls_per_item']:.1f}",
            ", ".join(f"{name} {n:g}" for name, n in list(r["commands"].items())[:8]),
            "-" if r["side"] == CHORD else str(r["parent_phase_max"]),
        )
        for r in records
    ]
    return report.align([head, *body])


def field_lines(runs: list[Run]) -> list[str]:
    """Per side, the record's fields at its biggest sample (of the run with the biggest record)."""
    lines = ["the parent's record at its biggest, by field (name + value bytes):"]
    for key in dict.fromkeys((r.items, r.label) for r in runs if r.label != CHORD):
        run = max((r for r in runs if (r.items, r.label) == key), key=lambda r: r.record_max_bytes)
        top = sorted(run.biggest_fields.items(), key=lambda kv: -kv[1])
        lines.append(f"  {key[0]:>6} {key[1]:10} " + ", ".join(f"{k} {v}" for k, v in top))
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; print the tables (and the JSON line with --json)."""
    args = parse_args(argv)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = check_quiet()
    with (
        terminate_as_exit(),
        tempfile.TemporaryDirectory(prefix="bench-kids-") as tmp,
        EmbeddedRedis() as server,
    ):
        folder = Path(tmp)
        name = f"bench-kid-{args.child}-{args.child_steps}"
        (folder / f"{name}.yaml").write_text(child_graph(args.child, args.child_steps))
        say(f"private Redis at {server.url}")
        runs = measure(Bench(server, args), folder)
        env = environment(server.url)
    env["load_average"] = {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]}
    records = rows(runs, [c.label for c in cells(args)])
    print(
        f"child graph: {args.child_steps} {args.child} step(s) per child; the chord: N chains of "
        f"{args.child_steps} no-op task(s); {args.repeat} repeat(s), a fresh worker each run; load "
        f"average before {env['load_average']['before']}, after {env['load_average']['after']}"
    )
    print(rate_table(records))
    print()
    print("CPU microseconds per item (the timed fan-out; /proc user + system)")
    print(cpu_table(records))
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
