"""Where one step's time goes, in-process: graphrunner's step loop against the baseline's task body.

    python -m benchmarks.profile_step [--kind gate|echo] [--steps 2000] [--block 500] [--top 25]

No worker runs. Against a private Redis, the harness submits one run of a loop graph through the
public `Client` and takes its steps in this process, one after another, through `take_step` (the
one function that knows the worker's step entry: adapt it, and only it, when that changes);
each step still publishes its successor's message, which nobody consumes. The baseline's task
body is called the same way (with and without the task-sent event). For each side it prints the
wall and CPU time per step per block of `--block` steps (a cost that grows with the step count
shows to the right), the Redis commands per step (INFO commandstats, script-internal ones
included), the profiled own time per step by package, and graphrunner's top functions.

Sampling instead of cProfile (no instrumentation overhead; C frames with --native):

    .venv/bin/pip install py-spy
    .venv/bin/py-spy record -r 1000 -o step.svg -- .venv/bin/python -m benchmarks.profile_step \\
        --only graphrunner --no-cprofile --steps 20000
    # -f speedscope -o step.json for https://www.speedscope.app; `py-spy top -- ...` for a live view

A real worker under load (what Celery does around the step, too): start
`python -m benchmarks.steps --graphs gate --repeat 1 --roundtrip-steps 0`, find the graphrunner
worker's main pid (`pgrep -f "graphrunner worker"`, the oldest) while it runs, and
`.venv/bin/py-spy record --subprocesses -d 20 -p PID -o worker.svg`.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import sysconfig
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import redis
from celery._state import _set_task_join_will_block

from benchmarks import baseline, graphs
from benchmarks.processes import ROOT, terminate_as_exit
from benchmarks.report import align
from graphrunner.client import Client
from graphrunner.cluster.transport.messages import StepMessage
from graphrunner.cluster.worker.runtime import WorkerRuntime
from graphrunner.embedded import EmbeddedRedis
from graphrunner.settings import Settings
from graphrunner.store.keys import KeySpace

Step = Callable[[int], None]
STDLIB = Path(sysconfig.get_paths()["stdlib"])
SOCKET_WORDS = ("socket", "select", "poll", "recv", "send")


@dataclass
class SideResult:
    """What was measured for one side: per-block wall and CPU, commands and own time by package."""

    name: str
    wall_us: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)
    commands: dict[str, float] = field(default_factory=dict)
    packages: dict[str, float] = field(default_factory=dict)
    top: str = ""
    notes: list[str] = field(default_factory=list)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.profile_step", description=__doc__.splitlines()[0])
    p.add_argument(
        "--kind", default="gate", choices=sorted(graphs.GRAPHS), help="graphrunner loop to profile"
    )
    p.add_argument("--steps", type=int, default=2000, help="steps to time on each side (as many profiled)")
    p.add_argument("--block", type=int, default=500, help="steps per timing block")
    p.add_argument("--top", type=int, default=25, help="functions (and packages) to list in the profile")
    p.add_argument("--only", choices=("both", "graphrunner", "baseline"), default="both", help="sides to run")
    p.add_argument("--no-cprofile", action="store_true", help="skip the cProfile pass (e.g. under py-spy)")
    return p.parse_args(argv)


# -- the one place that knows the worker's step entry ---------------------------------------


def take_step(runtime: WorkerRuntime, run_id: str, step: int) -> None:
    """Take step `step` of run `run_id` in this process, as a worker's step task does."""
    report = runtime.executor.execute(StepMessage(run_id=run_id, step=step))
    if report.outcome != "committed":
        raise RuntimeError(f"step {step} of run {run_id}: {report.outcome}")


# -- the two sides ---------------------------------------------------------------------------


def graphrunner_steps(url: str, kind: str, total: int) -> tuple[Step, Callable[[], int]]:
    """A function taking one step of a fresh run of `total` steps, and one reading its record's size."""
    settings = Settings(redis_url=url, quiet=True)
    client, runtime = Client(settings=settings), WorkerRuntime(settings)
    run_id = client.submit(graphs.load(kind, settings), {"limit": total + 1}).id
    queue = client.store.redis  # type: ignore[attr-defined]  # nobody consumes here: keep it short

    def step(n: int) -> None:
        take_step(runtime, run_id, n)
        queue.delete(settings.queue)

    return step, lambda: record_bytes(queue, run_id)


def baseline_steps(url: str, total: int, events: bool) -> Step:
    """A function calling the baseline task body once (one step of one chain)."""
    baseline.forget_clients()
    app = baseline.create_app(url, events=events)
    task = app.tasks[baseline.TASK_NAME]
    key = baseline.state_key(f"profile-{events}")
    with redis.Redis.from_url(url) as client:
        client.set(key, json.dumps({"n": 0, "t": 0.0}))
    return lambda _n: task(key, total + 1)


def record_bytes(client: redis.Redis, run_id: str) -> int:
    """Bytes of the run's stored record (every field name and value of its hash)."""
    fields = client.hgetall(KeySpace().run(run_id))
    return sum(len(str(k)) + len(str(v)) for k, v in fields.items())


# -- measuring -------------------------------------------------------------------------------


def blocks(step: Step, first: int, total: int, block: int) -> tuple[list[float], list[float]]:
    """Wall and CPU microseconds per step, for each block of `block` consecutive steps from `first`."""
    wall, cpu = [], []
    for start in range(first, first + total, block):
        end = min(start + block, first + total)
        began, began_cpu = time.perf_counter(), time.process_time()
        for n in range(start, end):
            step(n)
        wall.append((time.perf_counter() - began) * 1e6 / (end - start))
        cpu.append((time.process_time() - began_cpu) * 1e6 / (end - start))
    return wall, cpu


def command_stats(client: redis.Redis) -> Counter[str]:
    """Calls per Redis command so far (INFO commandstats), scripts' inner commands included."""
    stats = client.info("commandstats")
    return Counter({name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()})


def counted(client: redis.Redis, step: Step, first: int, total: int, block: int) -> SideResult:
    """Time `total` steps from `first` in blocks and count the Redis commands they sent."""
    before = command_stats(client)
    wall, cpu = blocks(step, first, total, block)
    delta = command_stats(client) - before
    delta["info"] -= 1  # the second INFO call itself
    commands = {name: round(n / total, 2) for name, n in delta.most_common() if n / total >= 0.005}
    return SideResult("", wall, cpu, commands)


def profiled(step: Step, first: int, count: int) -> cProfile.Profile:
    """A cProfile of `count` steps from `first`."""
    profile = cProfile.Profile()
    profile.enable()
    for n in range(first, first + count):
        step(n)
    profile.disable()
    return profile


def package_of(filename: str, function: str) -> str:
    """The package a profiled function belongs to: graphrunner/<sub>, a third-party one, stdlib or C."""
    if filename == "~":
        return "C: socket I/O" if any(w in function for w in SOCKET_WORDS) else "C: other built-ins"
    path = Path(filename)
    if "site-packages" in path.parts:
        return path.parts[path.parts.index("site-packages") + 1].removesuffix(".py")
    if path.is_relative_to(ROOT):
        return "/".join(path.relative_to(ROOT).parts[:2]).removesuffix(".py")
    if path.is_relative_to(STDLIB):
        return "stdlib: " + path.relative_to(STDLIB).parts[0].removesuffix(".py")
    return filename


def by_package(profile: cProfile.Profile, steps: int) -> dict[str, float]:
    """Profiled own time per step (microseconds) by package, largest first."""
    own: dict[str, float] = defaultdict(float)
    rows = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    for (filename, _line, function), row in rows.items():
        own[package_of(filename, function)] += row[2]
    return {k: round(v * 1e6 / steps, 1) for k, v in sorted(own.items(), key=lambda kv: -kv[1])}


def top_functions(profile: cProfile.Profile, top: int) -> str:
    """The `top` functions by own time, as pstats prints them."""
    out = io.StringIO()
    pstats.Stats(profile, stream=out).strip_dirs().sort_stats("tottime").print_stats(top)
    return out.getvalue()


def measure_side(
    name: str,
    client: redis.Redis,
    step: Step,
    args: argparse.Namespace,
    size: Callable[[], int] | None = None,
) -> SideResult:
    """Blocks of timed steps, then (unless --no-cprofile) as many profiled ones; `size` read after each."""
    result = counted(client, step, 0, args.steps, args.block)
    result.name = name
    if size is not None:
        result.notes.append(f"{name}: stored run record after {args.steps} steps: {size()} bytes")
    if not args.no_cprofile:
        profile = profiled(step, args.steps, args.steps)
        result.packages = by_package(profile, args.steps)
        result.top = top_functions(profile, args.top)
        if size is not None:
            result.notes.append(f"{name}: stored run record after {2 * args.steps} steps: {size()} bytes")
    return result


# -- output ----------------------------------------------------------------------------------


def timing_lines(results: list[SideResult], block: int) -> list[str]:
    """Wall and CPU microseconds per step per block, one line each per side."""
    lines = [f"microseconds per step, blocks of {block} steps (step count grows to the right)"]
    width = max(len(r.name) for r in results)
    for r in results:
        lines.append(f"{r.name:{width}}  wall " + "  ".join(f"{t:6.0f}" for t in r.wall_us))
        lines.append(f"{'':{width}}  cpu  " + "  ".join(f"{t:6.0f}" for t in r.cpu_us))
    return lines


def column_table(
    title: str, results: list[SideResult], values: Callable[[SideResult], dict[str, float]], top: int
) -> str:
    """One row per key (the `top` largest over all sides), one column per side."""
    totals: Counter[str] = Counter()
    for r in results:
        totals.update(values(r))
    head = (title, *(r.name for r in results))
    body = [(key, *(f"{values(r).get(key, 0):g}" for r in results)) for key, _ in totals.most_common(top)]
    sums = ("total", *(f"{sum(values(r).values()):.1f}" for r in results))
    return align([head, *body, sums])


def main(argv: Sequence[str] | None = None) -> int:
    """Time each side per block of steps, count its commands, profile it; print the tables."""
    args = parse_args(argv)
    n = args.steps
    results: list[SideResult] = []
    _set_task_join_will_block(True)  # as in a prefork pool process: send_task subscribes to no result
    with terminate_as_exit(), EmbeddedRedis() as server:
        client = redis.Redis.from_url(server.url, decode_responses=True)
        if args.only != "graphrunner":
            for events in (False, True):
                name = "baseline" + (" + sent event" if events else "")
                results.append(measure_side(name, client, baseline_steps(server.url, 2 * n, events), args))
        if args.only != "baseline":
            ours, size = graphrunner_steps(server.url, args.kind, 2 * n)
            results.append(measure_side(f"graphrunner {args.kind}", client, ours, args, size))
        client.close()
    print("\n".join(timing_lines(results, args.block) + [x for r in results for x in r.notes]))
    print("\nRedis commands per step (INFO commandstats; commands inside scripts counted too)")
    print(column_table("command", results, lambda r: r.commands, args.top))
    if not args.no_cprofile:
        print(f"\ncProfile own time per step by package (microseconds; steps {n}..{2 * n - 1})")
        print(column_table("package", results, lambda r: r.packages, args.top))
        for r in results:
            if r.name.startswith("graphrunner"):
                print(f"\ncProfile of {r.name}, steps {n}..{2 * n - 1}, top {args.top} by own time:")
                print(r.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
