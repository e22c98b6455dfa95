"""What RabbitMQ does that a Redis broker does not, against real nodes: it takes back a delivery
left unacknowledged past its `consumer_timeout` (and closes the channel), and it has quorum
queues (GRAPHRUNNER_QUEUE_TYPE=quorum).

Nothing is timed but the broker's own timeout: every wait is for a condition, with a deadline
generous enough for a loaded two-core machine.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import amqp
import pytest
from rabbitmq_node import RabbitMQNode, started_node
from support import settings_of, uid
from worker_procs import WorkerProcess, process_env

from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis

pytestmark = pytest.mark.rabbitmq

# RabbitMQ looks for timed-out deliveries every channel_tick_interval (60 s by default)
SHORT_TIMEOUT = {"consumer_timeout": 2000, "channel_tick_interval": 500}  # ms


@pytest.fixture
def impatient_node() -> Iterator[RabbitMQNode]:
    """A private node that takes back a delivery left unacknowledged for 2 s."""
    with started_node(rabbit=SHORT_TIMEOUT) as server:
        yield server


def test_a_step_longer_than_the_consumer_timeout_is_named_and_its_run_completes(
    impatient_node: RabbitMQNode, tmp_path: Path
) -> None:
    ran = tmp_path / "ran.txt"
    graph = tmp_path / "long.yaml"
    graph.write_text(
        textwrap.dedent(f"""
        id: amqp/long-{uid()}
        config: {{start: work}}
        nodes:
          work:
            action: {{tool: python, params: {{fn: "broker_targets:slow", args: {{path: "{ran}", seconds: 5}}}}}}
            next: done
          done: {{type: return, output: done}}
    """)
    )
    with EmbeddedRedis() as redis:
        env = {**process_env(redis.url), "GRAPHRUNNER_BROKER_URL": impatient_node.url}
        workers = [WorkerProcess(f"impatient{n}", env, tmp_path) for n in range(2)]
        client = Client(settings=settings_of(redis_url=redis.url, broker_url=impatient_node.url))
        try:
            for worker in workers:
                worker.wait_ready(timeout=60)
            run = client.submit(graph)
            result = run.wait(timeout=120)
            assert (result.status, result.output) == ("completed", "done"), result.error
            assert [r["status"] for r in run.steps()] == ["ok", "end"]  # the step committed once
            logs = "".join(w.log.read_text(errors="replace") for w in workers)
            assert "held its message longer than the broker's consumer_timeout" in logs
            assert "GRAPHRUNNER_CONSUMER_TIMEOUT" in logs
            # the channel was closed under them: they reconnected instead of exiting
            for worker in workers:
                assert worker.process.poll() is None, worker.log.read_text(errors="replace")[-3000:]

            # told the broker's limit, a worker refuses a graph whose node may run longer
            (tmp_path / "graphs").mkdir()
            (tmp_path / "graphs" / "slow.yaml").write_text(
                "id: amqp/slow\nconfig: {start: a}\nnodes:\n"
                "  a: {action: {tool: sleep, params: {seconds: 1}}, timeout: 5, next: done}\n"
                "  done: {type: return}\n"
            )
            refused = subprocess.run(
                [sys.executable, "-m", "graphrunner", "worker"],
                env={
                    **env,
                    "GRAPHRUNNER_CONSUMER_TIMEOUT": "2",
                    "GRAPHRUNNER_GRAPH_PATH": str(tmp_path / "graphs"),
                },
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert refused.returncode == 2, refused.stderr
            assert "GRAPHRUNNER_CONSUMER_TIMEOUT is 2s (the broker's consumer_timeout)" in refused.stderr
            # a timeout and a retry after a backoff under 1 s: both attempts in one delivery
            assert "node 'a' of graph 'amqp/slow' may hold its message 11s" in refused.stderr
        finally:
            client.close()
            for worker in workers:
                worker.stop()


def test_quorum_queues(rabbitmq: RabbitMQNode, tmp_path: Path) -> None:
    queue = f"gr-quorum-{uid()}"  # the session's node: a queue of this test's own
    graph = tmp_path / "quorum.yaml"
    graph.write_text(
        textwrap.dedent(f"""
        id: amqp/quorum-{uid()}
        state: {{out: {{type: list, default: [], reducer: append}}}}
        config: {{start: fan}}
        nodes:
          fan:
            type: foreach
            over: [1, 2, 3, 4]
            as: x
            parallel: true
            action: {{tool: echo, params: {{twice: "${{x * 2}}"}}}}
            collect: out
            next: nap
          nap: {{action: {{tool: sleep, params: {{seconds: 0.5}}}}, next: done}}
          done: {{type: return, output: "${{state.out.map(r, r.twice)}}"}}
    """)
    )
    with EmbeddedRedis() as redis:
        env = {
            **process_env(redis.url),
            "GRAPHRUNNER_BROKER_URL": rabbitmq.url,
            "GRAPHRUNNER_QUEUE": queue,
            "GRAPHRUNNER_QUEUE_TYPE": "quorum",
        }
        worker = WorkerProcess("quorum", env, tmp_path, concurrency=2)
        settings = settings_of(redis_url=redis.url, broker_url=rabbitmq.url, queue=queue, queue_type="quorum")
        client = Client(settings=settings)
        try:
            worker.wait_ready(timeout=60)
            result = client.submit(graph).wait(timeout=120)
            assert (result.status, result.output) == ("completed", [2, 4, 6, 8]), result.error
        finally:
            client.close()
            worker.stop()
    with amqp.Connection(f"127.0.0.1:{rabbitmq.port}", userid="guest", password="guest") as conn:
        # the queue is a quorum queue: RabbitMQ refuses to declare it classic
        with pytest.raises(amqp.exceptions.PreconditionFailed, match="x-queue-type"):
            conn.channel().queue_declare(
                queue, durable=True, auto_delete=False, arguments={"x-queue-type": "classic"}
            )
        # graphrunner sends no ETA message: Celery's delayed-delivery queues were not declared
        with pytest.raises(amqp.exceptions.NotFound, match="celery_delayed_0"):
            conn.channel().queue_declare("celery_delayed_0", passive=True)
