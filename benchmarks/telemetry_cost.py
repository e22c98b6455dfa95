"""What a step's telemetry costs, in-process: CPU per step of `spans.step` around an empty step.

    python -m benchmarks.telemetry_cost [--steps 20000]

Each case runs in a fresh process (the SDK can be set up once per process) with the `OTEL_*`
variables it names, against an OTLP/HTTP sink in a process of its own (`benchmarks.otlp_sink`);
the CPU time counted is the process's, every thread included (the batch span processor's
export, the metric reader's). Nothing of Redis or Celery runs: this is the telemetry alone, the
part of a step's cost that `benchmarks.steps --otel` shows as a whole.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence

from graphrunner.embedded import free_port

CASES: dict[str, dict[str, str]] = {
    "nothing (OTEL_* unset)": {},
    "spans over OTLP/HTTP": {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "none"},
    "metrics over OTLP": {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "otlp"},
    "spans and metrics over OTLP": {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "otlp"},
    "spans of an unsampled run": {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_TRACES_SAMPLER": "traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "0",
    },
    "the Prometheus endpoint": {"BENCH_PROMETHEUS": "1"},
}


def one_case(steps: int) -> float:
    """CPU microseconds per step in this process, as its environment sets telemetry up."""
    from graphrunner import parse_graph
    from graphrunner.engine import RunSnapshot
    from graphrunner.telemetry import prometheus, propagation, sdk, spans

    sdk.configure("worker")
    endpoint = prometheus.serve("127.0.0.1", free_port()) if os.environ.get("BENCH_PROMETHEUS") else None
    graph = parse_graph("id: bench/telemetry\nconfig: {start: a}\nnodes:\n  a: {action: {tool: echo}}\n")
    snap = RunSnapshot(run_id="r" * 32, graph_id=graph.id, node="a", trace=propagation.at_submit("r" * 32))

    def loop(n: int) -> float:
        started = time.process_time()
        for _ in range(n):
            with spans.step(graph, snap, "bench:1", time.time() - 0.001, "bench") as taken:
                taken.ended("ok")
        sdk.flush()  # the export of what was recorded is part of the cost
        return (time.process_time() - started) / n * 1e6

    loop(steps // 10)  # warm up
    cost = loop(steps)
    if endpoint is not None:
        endpoint.close()
    return cost


def main(argv: Sequence[str] | None = None) -> int:
    """Run every case in a process of its own; print the table."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.telemetry_cost", description=__doc__.splitlines()[0]
    )
    p.add_argument("--steps", type=int, default=20000)
    p.add_argument("--case", help=argparse.SUPPRESS)  # one case, in this process (the child's side)
    args = p.parse_args(argv)
    if args.case:
        print(f"{one_case(args.steps):.1f}")
        return 0
    port = free_port()
    sink = subprocess.Popen([sys.executable, "-m", "benchmarks.otlp_sink", str(port)], start_new_session=True)
    try:
        time.sleep(0.5)
        print("case                            CPU us per step")
        for name, env in CASES.items():
            clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "BENCH_"))}
            clean |= {
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
                "OTEL_BSP_MAX_QUEUE_SIZE": "100000",
            }
            if not any(k.startswith("OTEL_") for k in env):  # an endpoint alone turns export on
                clean.pop("OTEL_EXPORTER_OTLP_ENDPOINT")
            command = [
                sys.executable,
                "-m",
                "benchmarks.telemetry_cost",
                "--steps",
                str(args.steps),
                "--case",
                "1",
            ]
            out = subprocess.run(command, env=clean | env, capture_output=True, text=True, check=True)
            print(f"{name:<32}{out.stdout.strip():>15}")
    finally:
        sink.terminate()
        sink.wait(timeout=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
