"""Where one step's time goes, in-process: graphrunner's step task body against the baseline's.

    python -m benchmarks.profile_step [--kind gate|echo] [--steps 2000] [--top 25]

No worker runs: the harness calls the baseline task body and graphrunner's `StepExecutor.execute`
directly, step after step, against a private Redis (each call still publishes its successor's
message, which nobody consumes). It prints the wall time per step of each, per block of
`--block` steps (a cost that grows with the step count shows to the right), the time per step
of each stage (store reads and writes, engine, enqueue), and a cProfile of graphrunner's steps.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks import baseline, graphs
from benchmarks.processes import terminate_as_exit
from graphrunner.client import Client
from graphrunner.cluster.messages import StepMessage
from graphrunner.embedded import EmbeddedRedis
from graphrunner.settings import Settings
from graphrunner.store import keys

Step = Callable[[int], None]
Stages = dict[str, float]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.profile_step", description=__doc__.splitlines()[0])
    p.add_argument(
        "--kind", default="gate", choices=sorted(graphs.GRAPHS), help="graphrunner loop to profile"
    )
    p.add_argument("--steps", type=int, default=2000, help="steps to time on each side")
    p.add_argument("--block", type=int, default=500, help="steps per timing block")
    p.add_argument("--top", type=int, default=25, help="functions to list in the profile")
    return p.parse_args(argv)


def clocked(owner: Any, name: str, stages: Stages, label: str) -> None:
    """Replace `owner.name` (on the instance) by a wrapper that adds its wall time to `stages[label]`."""
    inner = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            stages[label] += time.perf_counter() - began

    setattr(owner, name, wrapper)


def baseline_steps(url: str, total: int, events: bool, stages: Stages) -> Step:
    """Call the baseline task body once per step of one chain, its GET, SET and send_task clocked."""
    baseline.forget_clients()
    app = baseline.create_app(url, events=events)
    task = app.tasks[baseline.TASK_NAME]
    key = baseline.state_key(f"profile-{events}")
    client = baseline._redis(url)
    client.set(key, json.dumps({"n": 0, "t": 0.0}))
    clocked(client, "get", stages, "store read (GET)")
    clocked(client, "set", stages, "store write (SET)")
    clocked(app, "send_task", stages, "enqueue (send_task)")
    return lambda _step: task(key, total + 1)


def graphrunner_steps(url: str, kind: str, total: int, stages: Stages) -> tuple[Step, Callable[[], int]]:
    """Call the worker's `StepExecutor.execute` once per step of one run, its stages clocked.

    Also returns a function that reads the size in bytes of the run's stored snapshot.
    """
    settings = Settings(redis_url=url, quiet=True)
    client = Client(settings=settings)
    run_id = client.submit(graphs.load(kind, settings), {"limit": total + 1}).id
    redis = client.store.redis
    executor = client.runtime.executor
    clocked(executor.store, "load_run", stages, "store read (load_run)")
    clocked(executor.store, "commit_step", stages, "store write (commit_step)")
    clocked(executor, "_run", stages, "engine (advance, hooks)")
    clocked(executor, "enqueue", stages, "enqueue (send_task)")

    def step(n: int) -> None:
        report = executor.execute(StepMessage(run_id=run_id, step=n))
        if report.outcome != "committed":
            raise RuntimeError(f"step {n} of run {run_id}: {report.outcome}")

    return step, lambda: int(redis.hstrlen(keys.run(run_id), "snapshot"))


def blocks(step: Step, first: int, total: int, block: int) -> list[float]:
    """Microseconds per step, for each block of `block` consecutive steps from `first`."""
    timings = []
    for start in range(first, first + total, block):
        end = min(start + block, first + total)
        began = time.perf_counter()
        for n in range(start, end):
            step(n)
        timings.append((time.perf_counter() - began) * 1e6 / (end - start))
    return timings


def profiled(step: Step, first: int, count: int, top: int) -> str:
    """A cProfile of `count` steps from `first`, the top functions by own time."""
    profile = cProfile.Profile()
    profile.enable()
    for n in range(first, first + count):
        step(n)
    profile.disable()
    out = io.StringIO()
    pstats.Stats(profile, stream=out).strip_dirs().sort_stats("tottime").print_stats(top)
    return out.getvalue()


def side(name: str, timings: list[float], stages: Stages, steps: int) -> list[str]:
    """Lines for one side: wall time per block, then per stage."""
    lines = [f"{name}: " + "  ".join(f"{t:6.0f}" for t in timings) + " us/step"]
    accounted = sum(stages.values()) * 1e6 / steps
    for label, seconds in stages.items():
        lines.append(f"    {label:28} {seconds * 1e6 / steps:6.0f} us/step")
    lines.append(f"    {'rest of the task body':28} {sum(timings) / len(timings) - accounted:6.0f} us/step")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Time both task bodies per block of steps and per stage, then profile graphrunner's."""
    args = parse_args(argv)
    n = args.steps
    lines = [f"wall microseconds per step, blocks of {args.block} steps (step count grows to the right)"]
    with terminate_as_exit(), EmbeddedRedis() as server:
        for events in (False, True):
            stages: Stages = defaultdict(float)
            timings = blocks(baseline_steps(server.url, n, events, stages), 0, n, args.block)
            lines += side(f"baseline{' + task-sent event' if events else ''}", timings, stages, n)
        stages = defaultdict(float)
        ours, snapshot_bytes = graphrunner_steps(server.url, args.kind, 2 * n, stages)
        lines += side(f"graphrunner {args.kind} (execute)", blocks(ours, 0, n, args.block), stages, n)
        lines.append(f"stored snapshot (without state) after {n} steps: {snapshot_bytes()} bytes")
        profile = profiled(ours, n, n, args.top)
        lines.append(f"stored snapshot (without state) after {2 * n} steps: {snapshot_bytes()} bytes")
    print("\n".join(lines))
    print(f"\ncProfile of graphrunner steps {n}..{2 * n - 1}:")
    print(profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
