"""RabbitMQ going away while runs are in flight: the node is stopped and started again (same
port, same data: durable queues and persistent messages survive) while steps and foreach items
run, durable timers come due and commits publish what follows; a worker and `graphrunner beat`
are killed while it is away. The other worker reconnects with backoff; no run is lost.

A worker stops its housekeeping (timers, sweeps) while its consumer reconnects; `graphrunner
beat` goes on, so it is beat that takes the timers that come due during the outage: into their
runs' outboxes, where they outlive it.

Nothing is timed here but the outage itself: every wait is for a condition, with a deadline
generous enough for a loaded two-core machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from rabbitmq_node import RabbitMQNode, started_node
from support import settings_of, uid, wait_for
from worker_procs import WorkerProcess, process_env

from graphrunner.client import Client, RunHandle
from graphrunner.embedded import EmbeddedRedis

pytestmark = pytest.mark.rabbitmq

RUNS = 6
FAST = {"GRAPHRUNNER_STALL_AFTER": "3", "GRAPHRUNNER_SWEEP_INTERVAL": "1"}


@pytest.fixture
def node() -> Iterator[RabbitMQNode]:
    """A private node of this test's own: it is stopped and started again."""
    with started_node() as server:
        yield server


def sleeping(run: RunHandle) -> bool:
    """The run waits for its durable timer."""
    steps = run.steps()
    return bool(steps) and steps[-1].get("status") == "sleeping"


def test_runs_in_flight_survive_a_broker_restart(node: RabbitMQNode, tmp_path: Path) -> None:
    ran = tmp_path / "ran.txt"
    slow = f'{{tool: python, params: {{fn: "broker_targets:slow", args: {{path: "{ran}", seconds: 1}}}}}}'
    graph = tmp_path / "outage.yaml"
    graph.write_text(
        textwrap.dedent(f"""
        id: outage/steps-{uid()}
        inputs: {{n: {{type: integer, required: true}}}}
        state: {{out: {{type: list, default: [], reducer: append}}}}
        config: {{start: a}}
        nodes:
          a: {{action: {slow}, next: fan}}
          fan: {{type: foreach, over: [1, 2, 3], as: x, parallel: true, action: {slow}, collect: out, next: nap}}
          nap: {{action: {{tool: sleep, params: {{seconds: 2}}}}, next: c}}
          c: {{action: {slow}, next: done}}
          done: {{type: return, output: "${{inputs.n}}"}}
    """)
    )
    with EmbeddedRedis() as redis:
        env = {**process_env(redis.url), **FAST, "GRAPHRUNNER_BROKER_URL": node.url}
        workers = [WorkerProcess(f"outage{n}", env, tmp_path, concurrency=2) for n in range(2)]
        with (tmp_path / "beat.log").open("w") as log:
            beat = subprocess.Popen(
                [sys.executable, "-m", "graphrunner", "beat"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        client = Client(settings=settings_of(redis_url=redis.url, broker_url=node.url))
        try:
            for worker in workers:
                worker.wait_ready(timeout=60)
            runs = [client.submit(graph, {"n": n}) for n in range(RUNS)]
            # the first runs to get there wait for their durable timer (due during the outage),
            # the others run steps or foreach items whose commits and chord joins have nowhere to go
            wait_for(lambda: any(sleeping(r) for r in runs), 90, "a run waiting for its timer")
            sleepers = [r for r in runs if sleeping(r)]

            node.stop_server()
            # beat takes the timers out of the store as they come due: into their runs' outboxes,
            # not only into the memory of a process that cannot publish them
            wait_for(lambda: all(client.store.outbox(r.id) for r in sleepers), 60, "due timers kept")
            os.killpg(beat.pid, signal.SIGKILL)
            victim, survivor = workers
            victim.kill()  # what it held comes back from RabbitMQ or from its runs' outboxes
            node.restart()
            workers.append(WorkerProcess("outage2", env, tmp_path, concurrency=2))

            results = [run.wait(timeout=180) for run in runs]
            assert [(r.status, r.output) for r in results] == [("completed", n) for n in range(RUNS)], [
                r.error for r in results
            ]
            assert all(r.path == ["a", "fan", "nap", "c", "done"] for r in results)
            assert survivor.process.poll() is None, survivor.log.read_text(errors="replace")[-3000:]
            assert "Connection to broker lost" in survivor.log.read_text(errors="replace")  # reconnected
        finally:
            client.close()
            for worker in workers:
                worker.stop()
            if beat.poll() is None:
                os.killpg(beat.pid, signal.SIGKILL)
            beat.wait(timeout=10)
