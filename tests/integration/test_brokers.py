"""The same graphs on both brokers: Redis (the store's own) and RabbitMQ (a private node).

Each broker gets a Redis of its own for the run state and two `graphrunner worker` processes;
the graphs, the client and the assertions are the same. What differs on AMQP: a worker that
dies has its messages requeued by RabbitMQ when its connection drops (no visibility timeout),
and messages go through the run's outbox (published after the commit) instead of being pushed
by the commit script.
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rabbitmq_node import RabbitMQNode
from support import uid
from worker_procs import WorkerProcess, process_env

from graphrunner import load_graph
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis
from graphrunner.errors import BrokerUnavailable
from graphrunner.settings import Settings

TARGETS = "broker_targets"
FAST = {
    "GRAPHRUNNER_VISIBILITY_TIMEOUT": "3",
    "GRAPHRUNNER_STALL_AFTER": "3",
    "GRAPHRUNNER_SWEEP_INTERVAL": "1",
}


class Deployment:
    """A Redis, a broker, two worker processes and a client, for one broker kind."""

    def __init__(
        self, broker: str, redis: EmbeddedRedis, broker_url: str | None, env: dict[str, Any], logs: Path
    ):
        self.broker = broker
        self.redis_url, self.broker_url = redis.url, broker_url
        self.env = {**env, **FAST, "GRAPHRUNNER_REDIS_URL": redis.url}
        if broker_url:
            self.env["GRAPHRUNNER_BROKER_URL"] = broker_url
        self.logs = logs
        self.workers = [self._start(n) for n in range(2)]
        for worker in self.workers:
            worker.wait_ready(timeout=60)
        self.client = Client(settings=Settings(redis_url=redis.url, broker_url=broker_url))
        self.started = 2

    def _start(self, n: int) -> WorkerProcess:
        return WorkerProcess(f"{self.broker}{n}", self.env, self.logs)

    def replace_dead_workers(self) -> None:
        for i, worker in enumerate(self.workers):
            if worker.process.poll() is not None:
                self.workers[i] = self._start(self.started)
                self.started += 1
                self.workers[i].wait_ready(timeout=60)

    def close(self) -> None:
        self.client.close()
        for worker in self.workers:
            worker.stop()


@pytest.fixture(scope="module", params=["redis", pytest.param("amqp", marks=pytest.mark.rabbitmq)])
def deployment(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    broker: str = request.param
    node: RabbitMQNode | None = request.getfixturevalue("rabbitmq") if broker == "amqp" else None
    with EmbeddedRedis() as redis:
        logs = tmp_path_factory.mktemp(f"workers-{broker}")
        deployed = Deployment(broker, redis, node.url if node else None, process_env(redis.url), logs)
        try:
            yield deployed
        finally:
            deployed.close()


@pytest.fixture
def cluster(deployment: Deployment) -> Client:
    deployment.replace_dead_workers()
    return deployment.client


def graph_file(folder: Path, text: str) -> Path:
    path = folder / f"g-{uid()}.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_linear_steps(cluster: Client, tmp_path: Path) -> None:
    graph = graph_file(
        tmp_path,
        f"""
        id: brokers/linear-{uid()}
        state: {{n: {{type: integer, default: 0}}}}
        config: {{start: add, max_steps: 50}}
        nodes:
          add:
            action: {{tool: echo, params: {{n: "${{state.n}}"}}}}
            assign: {{n: "${{result.n + 1}}"}}
            next: [{{to: done, when: "state.n >= 10"}}, {{to: add}}]
          done: {{type: return, output: "${{state.n}}"}}
    """,
    )
    result = cluster.submit(graph).wait(timeout=60)
    assert (result.status, result.output, result.step_count) == ("completed", 10, 11)


def test_parallel_foreach(cluster: Client, tmp_path: Path) -> None:
    graph = graph_file(
        tmp_path,
        f"""
        id: brokers/fan-{uid()}
        state: {{out: {{type: list, default: [], reducer: append}}}}
        config: {{start: fan}}
        nodes:
          fan:
            type: foreach
            over: "${{inputs.items}}"
            as: x
            parallel: true
            action: {{tool: echo, params: {{twice: "${{x * 2}}"}}}}
            collect: out
            next: done
          done: {{type: return, output: "${{state.out.map(r, r.twice)}}"}}
        inputs: {{items: {{type: list, required: true}}}}
    """,
    )
    result = cluster.submit(graph, {"items": list(range(25))}).wait(timeout=60)
    assert result.status == "completed", result.error
    assert result.output == [2 * n for n in range(25)]


def test_subgraph(cluster: Client, tmp_path: Path) -> None:
    child_id = f"brokers/child-{uid()}"
    (tmp_path / "child.yaml").write_text(
        textwrap.dedent(f"""
        id: {child_id}
        inputs: {{word: {{type: string, required: true}}}}
        state: {{loud: string}}
        config: {{start: shout}}
        nodes:
          shout: {{action: {{tool: echo, params: {{t: "${{inputs.word}}!"}}}}, assign: {{loud: "${{result.t}}"}}, next: done}}
          done: {{type: return, output: {{loud: "${{state.loud}}"}}}}
    """)
    )
    parent = graph_file(
        tmp_path,
        f"""
        id: brokers/parent-{uid()}
        state: {{heard: string, word: {{type: string, default: hi}}}}
        config: {{start: ask}}
        nodes:
          ask:
            type: subgraph
            graph: {child_id}
            inputs: {{word: word}}
            assign: {{heard: "${{result.loud}}"}}
            next: done
          done: {{type: return, output: "${{state.heard}}"}}
    """,
    )
    result = cluster.submit(load_graph(parent)).wait(timeout=60)
    assert (result.status, result.output) == ("completed", "hi!"), result.error


def test_retry_countdown(cluster: Client, tmp_path: Path) -> None:
    calls = tmp_path / "calls.txt"
    graph = graph_file(
        tmp_path,
        f"""
        id: brokers/retry-{uid()}
        state: {{calls: integer}}
        config: {{start: call}}
        nodes:
          call:
            action: {{tool: python, params: {{fn: "{TARGETS}:flaky", args: {{path: "{calls}", failures: 2}}}}}}
            retry: {{max_attempts: 3, initial: 0.5, jitter: 0}}
            assign: {{calls: "${{result.calls}}"}}
            next: done
          done: {{type: return, output: "${{state.calls}}"}}
    """,
    )
    result = cluster.submit(graph).wait(timeout=60)
    assert (result.status, result.output) == ("completed", 3), result.error


def test_durable_sleep(cluster: Client, tmp_path: Path) -> None:
    graph = graph_file(
        tmp_path,
        f"""
        id: brokers/nap-{uid()}
        config: {{start: nap}}
        nodes:
          nap: {{action: {{tool: sleep, params: {{seconds: 1}}}}, next: done}}
          done: {{type: return, output: slept}}
    """,
    )
    started = time.monotonic()
    result = cluster.submit(graph).wait(timeout=60)
    assert (result.status, result.output) == ("completed", "slept")
    assert time.monotonic() - started >= 1.0


def test_pause_and_resume(cluster: Client, tmp_path: Path) -> None:
    graph = graph_file(
        tmp_path,
        f"""
        id: brokers/approve-{uid()}
        state: {{approved: {{type: boolean, default: false}}}}
        config: {{start: ask}}
        nodes:
          ask: {{type: pause, message: "approve?", next: [{{to: ship, when: "state.approved"}}, {{to: done}}]}}
          ship: {{type: gate, next: done}}
          done: {{type: return}}
    """,
    )
    run = cluster.submit(graph)
    assert run.wait(timeout=60).status == "paused"
    cluster.resume(run.id, state_patch={"approved": True})
    result = run.wait(timeout=60)
    assert (result.status, result.path) == ("completed", ["ask", "ship", "done"])


def test_cancel(cluster: Client, tmp_path: Path) -> None:
    graph = graph_file(
        tmp_path,
        f"""
        id: brokers/long-{uid()}
        config: {{start: nap}}
        nodes:
          nap: {{action: {{tool: sleep, params: {{seconds: 60}}}}, next: done}}
          done: {{type: return}}
    """,
    )
    run = cluster.submit(graph)
    deadline = time.monotonic() + 30
    while not run.steps() and time.monotonic() < deadline:  # the sleep has started
        time.sleep(0.1)
    assert cluster.cancel(run.id).status() == "cancelled"
    assert run.wait(timeout=30).status == "cancelled"


def test_a_worker_killed_mid_step(deployment: Deployment, cluster: Client, tmp_path: Path) -> None:
    started = tmp_path / "started.txt"
    graph = graph_file(
        tmp_path,
        f"""
        id: brokers/crash-{uid()}
        config: {{start: work}}
        nodes:
          work:
            action: {{tool: python, params: {{fn: "{TARGETS}:slow", args: {{path: "{started}", seconds: 3}}}}}}
            next: done
          done: {{type: return, output: done}}
    """,
    )
    run = cluster.submit(graph)
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = int(started.read_text().split()[0])
    (victim,) = [w for w in deployment.workers if w.owns(pid)]
    victim.kill()
    result = run.wait(timeout=120)
    assert (result.status, result.output) == ("completed", "done"), result.error
    pids = [int(p) for p in started.read_text().split()]
    assert len(pids) == 2  # the step was taken again...
    assert any(w.owns(pids[1]) for w in deployment.workers if w is not victim)  # ...by the other worker


# only on AMQP: with the Redis broker the broker is the store, whose login fails at connect
@pytest.mark.parametrize("deployment", [pytest.param("amqp", marks=pytest.mark.rabbitmq)], indirect=True)
def test_a_broker_that_refuses_the_login_is_named_and_the_run_is_sent_later(
    deployment: Deployment, cluster: Client, tmp_path: Path
) -> None:
    assert deployment.broker_url is not None
    wrong = deployment.broker_url.replace("guest:guest", "guest:wrong")
    producer = Client(settings=Settings(redis_url=deployment.redis_url, broker_url=wrong))
    graph = graph_file(
        tmp_path,
        f"""
        id: brokers/refused-{uid()}
        config: {{start: a}}
        nodes:
          a: {{action: {{tool: echo, params: {{x: 1}}}}, next: done}}
          done: {{type: return, output: sent later}}
    """,
    )
    run_id = f"refused-{uid()}"
    try:
        with pytest.raises(BrokerUnavailable) as refused:
            producer.submit(graph, run_id=run_id)
    finally:
        producer.close()
    message = str(refused.value)
    assert "(GRAPHRUNNER_BROKER_URL)" in message and "ACCESS_REFUSED" in message
    assert "wrong" not in message  # the password is masked
    # the run was stored with its first message in its outbox: the sweeper sends it
    result = cluster.run(run_id).wait(timeout=120)
    assert (result.status, result.output) == ("completed", "sent later")
