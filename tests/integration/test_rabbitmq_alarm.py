"""RabbitMQ under a memory alarm blocks every publishing connection: a publish is written, its
confirm never comes (celery/celery#9259). Every publish a worker makes (a step's next message, a
durable timer that came due) is bounded: it fails after `PUBLISH_DEADLINE`, the message stays in
its run's outbox, the connection is replaced, and once the alarm clears the runs complete, each
step committed once. Before, the worker's housekeeping thread waited on a confirm for as long as
the alarm lasted, and with it every timer and sweep of that worker.
"""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from rabbitmq_node import RabbitMQNode, started_node
from support import settings_of, wait_for
from worker_procs import WorkerProcess, process_env

from graphrunner import parse_graph
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis

pytestmark = pytest.mark.rabbitmq

FAST = {"GRAPHRUNNER_STALL_AFTER": "3", "GRAPHRUNNER_SWEEP_INTERVAL": "1"}
ROUNDS = 4
LOOP = """
    id: t/alarm
    state:
      n: {type: integer, default: 0}
      log: {type: list, default: [], reducer: append}
    config: {start: add, max_steps: 100}
    nodes:
      add:
        action: {tool: echo, params: {n: "${state.n}"}}
        assign: {n: "${result.n + 1}", log: ["${result.n}"]}
        next: [{to: done, when: "state.n >= ROUNDS"}, {to: nap}]
      nap: {action: {tool: sleep, params: {seconds: 0.2}}, next: add}
      done: {type: return, output: "${state.log}"}
"""


@pytest.fixture
def node() -> Iterator[RabbitMQNode]:
    """A node of this test's own: its alarm must not reach other tests."""
    with started_node() as server:
        yield server


def ctl(node: RabbitMQNode, *args: str) -> None:
    """`rabbitmqctl` against the private node (its own Erlang cookie)."""
    cookie = (node.dir / ".erlang.cookie").read_text().strip()
    subprocess.run(
        ["rabbitmqctl", "--erlang-cookie", cookie, "-n", node.name, *args],
        env=node._env(),
        check=True,
        capture_output=True,
        timeout=60,
    )


def test_publishes_are_bounded_under_a_memory_alarm_and_runs_complete_after_it(
    node: RabbitMQNode, tmp_path: Path
) -> None:
    graph = parse_graph(textwrap.dedent(LOOP).replace("ROUNDS", str(ROUNDS)))
    with EmbeddedRedis() as redis:
        env = {**process_env(redis.url), **FAST, "GRAPHRUNNER_BROKER_URL": node.url}
        client = Client(settings=settings_of(redis_url=redis.url, broker_url=node.url))
        worker = WorkerProcess("alarmed", env, tmp_path, concurrency=2)
        try:
            worker.wait_ready(timeout=60)
            runs = [client.submit(graph) for _ in range(3)]
            wait_for(lambda: all(len(r.steps()) >= 2 for r in runs), 60, "every run under way")
            ctl(node, "set_vm_memory_high_watermark", "absolute", "1")  # every publisher blocked
            # a publish gave up, bounded, while the alarm lasts (before: it waited for the alarm to end)
            wait_for(
                lambda: "did not take a message" in worker.log.read_text(errors="replace"),
                90,
                "a bounded publish",
            )
            ctl(node, "set_vm_memory_high_watermark", "0.4")
            for run in runs:
                result = run.wait(timeout=120)
                assert (result.status, result.output) == ("completed", list(range(ROUNDS))), result.error
                assert result.step_count == 2 * ROUNDS  # each step committed once
        finally:
            client.close()
            worker.stop()
