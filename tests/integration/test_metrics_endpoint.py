"""`graphrunner worker --metrics-port`: a prefork worker's pool processes, added up on one endpoint."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from support import wait_for
from worker_procs import WorkerProcess

from graphrunner import parse_graph
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis, free_port

GRAPH = """
    id: t/metered
    inputs: {k: {type: integer, required: true}}
    state: {n: {type: integer, default: 0}}
    config: {start: add, max_steps: 50}
    nodes:
      add:
        action: {tool: echo, params: {n: "${state.n}"}}
        assign: {n: "${result.n + 1}"}
        next: [{to: done, when: "state.n >= inputs.k"}, {to: add}]
      done: {type: return, output: {n: "${state.n}"}}
"""


class MetricsWorker(WorkerProcess):
    """`graphrunner worker -P prefork -c 2 --metrics-port PORT`, its log in a file."""

    def __init__(self, env: dict[str, Any], log_dir: Path, port: int) -> None:
        self.name = "metered"
        self.log = log_dir / "metered.log"
        args = [
            sys.executable, "-m", "graphrunner", "worker", "-P", "prefork", "-c", "2",
            "--metrics-port", str(port), "-n", "metered@%h",
            "--without-mingle", "--without-gossip", "--without-heartbeat", "--loglevel=INFO",
        ]  # fmt: skip
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )


@contextmanager
def metered_worker(redis: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path) -> Iterator[int]:
    """A prefork worker of `redis` serving its metrics; yields the port."""
    port = free_port()
    proc = MetricsWorker({**worker_env, "GRAPHRUNNER_REDIS_URL": redis.url}, tmp_path, port)
    try:
        proc.wait_ready()
        yield port
    finally:
        proc.stop()
    assert proc.process.returncode == 0, proc.log.read_text(errors="replace")[-2000:]


def scrape(port: int) -> dict[str, list[Any]]:
    """The endpoint's samples by name."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    samples: dict[str, list[Any]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample)
    return samples


def steps_by_node(samples: dict[str, list[Any]]) -> Counter[tuple[str, str]]:
    """`graphrunner_steps_total` by graph and node, every outcome of a task that took a step."""
    counted: Counter[tuple[str, str]] = Counter()
    for sample in samples.get("graphrunner_steps_total", []):
        assert set(sample.labels) == {"graph", "node", "outcome"}
        if sample.labels["outcome"] != "duplicate":
            counted[sample.labels["graph"], sample.labels["node"]] += int(sample.value)
    return counted


def test_a_prefork_worker_counts_its_pools_steps_on_its_metrics_port(
    private_redis: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    graph = parse_graph(textwrap.dedent(GRAPH))
    with metered_worker(private_redis, worker_env, tmp_path) as port, Client(private_redis.url) as client:
        assert scrape(port).get("graphrunner_steps_total", []) == []
        runs = [client.submit(graph, {"k": k}) for k in (1, 2, 3, 4)]
        for run in runs:
            assert run.wait(timeout=60).status == "completed"
        taken = Counter(("t/metered", s["node"]) for run in runs for s in run.steps() if "node" in s)
        assert taken == {("t/metered", "add"): 10, ("t/metered", "done"): 4}

        def counted() -> bool:
            return steps_by_node(scrape(port)) == taken

        wait_for(counted, 30, f"the endpoint to count the steps {dict(taken)}")
        samples = scrape(port)
        finished = {s.labels["status"]: s.value for s in samples["graphrunner_runs_finished_total"]}
        assert finished == {"completed": 4.0}
        durations = samples["graphrunner_step_duration_seconds_count"]
        assert {s.labels["graph"] for s in durations} == {"t/metered"}
        assert sum(s.value for s in durations) == 14  # a duration for each step counted
        in_flight = {s.labels["status"]: s.value for s in samples["graphrunner_runs_in_flight"]}
        assert in_flight == {"pending": 0.0, "running": 0.0, "paused": 0.0}
