"""The same graphs on every topology: one Redis; a Redis and RabbitMQ (a private node); a Redis
Cluster (three masters) with a Redis broker; a Redis Cluster with RabbitMQ and a Redis for
Celery's chord counters.

Each topology gets two `graphrunner worker` processes; the graphs, the client and the
assertions are the same. What differs on AMQP: a worker that dies has its messages requeued by
RabbitMQ when its connection drops (no visibility timeout). With any broker other than the
store's own Redis (AMQP, or a Redis beside a cluster), messages go through the run's outbox
(published after the commit) instead of being pushed by the commit script.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from redis_cluster import RedisCluster
from support import FAILED, first_pid, settings_of, uid
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


@dataclass(frozen=True)
class Topology:
    """Where the run state, the messages and Celery's chord counters live."""

    name: str
    store_url: str
    broker_url: str | None = None
    backend_url: str | None = None

    def settings(self) -> Settings:
        return settings_of(
            redis_url=self.store_url, broker_url=self.broker_url, result_backend_url=self.backend_url
        )

    def env(self) -> dict[str, str]:
        named = {
            "GRAPHRUNNER_REDIS_URL": self.store_url,
            "GRAPHRUNNER_BROKER_URL": self.broker_url,
            "GRAPHRUNNER_RESULT_BACKEND_URL": self.backend_url,
        }
        return {k: v for k, v in named.items() if v}


class Deployment:
    """A topology, two worker processes and a client."""

    def __init__(self, topology: Topology, env: dict[str, Any], logs: Path):
        self.topology = topology
        self.broker = topology.name
        self.redis_url, self.broker_url = topology.store_url, topology.broker_url
        self.env = {**env, **FAST, **topology.env()}
        self.logs = logs
        self.workers = [self._start(n) for n in range(2)]
        for worker in self.workers:
            worker.wait_ready(timeout=60)
        self.client = Client(settings=topology.settings())
        self.started = 2

    def _start(self, n: int) -> WorkerProcess:
        return WorkerProcess(f"{self.broker}{n}", self.env, self.logs)

    def replace_dead_workers(self) -> None:
        for i, worker in enumerate(self.workers):
            if worker.process.poll() is not None:
                self.workers[i] = self._start(self.started)
                self.started += 1
                self.workers[i].wait_ready(timeout=60)

    def log_tails(self, chars: int = 6000) -> str:
        """The end of every worker's log."""
        return "\n".join(
            f"--- worker {w.name} (exit {w.process.poll()}): {w.log}\n{w.log.read_text(errors='replace')[-chars:]}"
            for w in self.workers
        )

    def close(self) -> None:
        self.client.close()
        for worker in self.workers:
            worker.stop()


TOPOLOGIES = [
    "redis",
    pytest.param("amqp", marks=pytest.mark.rabbitmq),
    "cluster+redis",
    pytest.param("cluster+amqp", marks=pytest.mark.rabbitmq),
]


@pytest.fixture(scope="module", params=TOPOLOGIES)
def deployment(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    """One Redis (the broker too); a Redis and RabbitMQ; a Redis Cluster and a Redis broker (which
    keeps the chord counters too); a Redis Cluster, RabbitMQ and a Redis for the chord counters."""
    name: str = request.param
    with EmbeddedRedis() as redis:
        topology = _topology(request, name, redis.url)
        logs = tmp_path_factory.mktemp(f"workers-{name.replace('+', '-')}")
        deployed = Deployment(topology, process_env(topology.store_url), logs)
        try:
            yield deployed
        finally:
            deployed.close()


def _topology(request: pytest.FixtureRequest, name: str, redis_url: str) -> Topology:
    amqp = request.getfixturevalue("rabbitmq").url if name.endswith("amqp") else None
    if name == "redis":
        return Topology(name, redis_url)
    if name == "amqp":
        return Topology(name, redis_url, amqp)
    cluster: RedisCluster = request.getfixturevalue("redis_cluster")
    if name == "cluster+redis":
        return Topology(name, cluster.url, redis_url)
    return Topology(name, cluster.url, amqp, backend_url=redis_url)


@pytest.fixture
def cluster(deployment: Deployment, request: pytest.FixtureRequest) -> Iterator[Client]:
    deployment.replace_dead_workers()
    yield deployment.client
    if request.node.stash.get(FAILED, False):  # the workers' side of a failure, in its report
        print(deployment.log_tails())


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


def test_history_and_forks(cluster: Client, tmp_path: Path) -> None:
    """The state at every step (a value too large for its record, a resume's patch) and forks of
    forks, on every topology: the history's side records share the run's slot on a cluster."""
    graph = graph_file(
        tmp_path,
        f"""
        id: brokers/travel-{uid()}
        state:
          n: {{type: integer, default: 0}}
          big: {{type: string, default: "{"b" * 5000}"}}
          approved: {{type: boolean, default: false}}
        config: {{start: add}}
        nodes:
          add:
            action: {{tool: echo, params: {{n: "${{state.n}}"}}}}
            assign: {{n: "${{result.n + 1}}", big: "${{state.big + string(state.n)}}"}}
            next: [{{to: ask, when: "state.n >= 3"}}, {{to: add}}]
          ask: {{type: pause, next: done}}
          done: {{type: return}}
    """,
    )
    run = cluster.submit(graph)
    assert run.wait(timeout=60).status == "paused"
    final = cluster.resume(run.id, {"approved": True}).wait(timeout=60)
    entries = cluster.history(run.id)
    assert [e.status for e in entries] == ["start", "ok", "ok", "ok", "paused", "end"]
    assert entries[-1].state == final.state and entries[2].state["big"] == "b" * 5000 + "01"
    fork = cluster.fork(run.id, 1, {"n": 10})
    assert fork.wait(timeout=60).status == "paused"  # add once more (n 11), then the pause
    again = cluster.fork(fork.id, 3, {"approved": True})  # the fork's pause step: past it
    result = again.wait(timeout=60)
    assert result.status == "completed" and result.state["n"] == 11 and result.state["approved"]
    assert [r["step"] for r in again.steps()] == [4]


def test_the_cli_submits_waits_lists_and_shows_queues(deployment: Deployment, tmp_path: Path) -> None:
    graph_id = f"brokers/cli-{uid()}"
    graph = graph_file(
        tmp_path,
        f"""
        id: {graph_id}
        config: {{start: a}}
        nodes:
          a: {{action: {{tool: echo, params: {{x: "${{inputs.x}}"}}}}, next: done}}
          done: {{type: return, output: "${{inputs.x}}"}}
        inputs: {{x: {{type: string, required: true}}}}
    """,
    )
    ids = [
        json.loads(cli(deployment, "submit", str(graph), "-i", f"x={n}", "--json"))["run_id"] for n in "ab"
    ]
    results = [json.loads(cli(deployment, "wait", run_id, "--timeout", "60", "--json")) for run_id in ids]
    assert [(r["status"], r["output"]) for r in results] == [("completed", "a"), ("completed", "b")]
    listed = json.loads(cli(deployment, "list", "--graph", graph_id, "--json"))
    assert [r["run_id"] for r in listed] == ids[::-1]  # newest first
    queues = json.loads(cli(deployment, "queues", "--json"))
    assert queues["dead_letters"] == 0 and isinstance(queues["queues"]["graphrunner"], int), queues


def cli(deployment: Deployment, *args: str) -> str:
    """`graphrunner ARGS` in this topology's environment; its stdout (it must exit 0)."""
    done = subprocess.run(
        [sys.executable, "-m", "graphrunner", *args],
        env=deployment.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"graphrunner {' '.join(args)}: {done.stderr}"
    return done.stdout


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
    pid = first_pid(started)
    (victim,) = [w for w in deployment.workers if w.owns(pid)]
    victim.kill()
    result = run.wait(timeout=120)
    assert (result.status, result.output) == ("completed", "done"), result.error
    pids = [int(p) for p in started.read_text().split()]
    assert len(pids) == 2  # the step was taken again...
    assert any(w.owns(pids[1]) for w in deployment.workers if w is not victim)  # ...by the other worker


# only on AMQP: with the Redis broker the broker is the store, whose login fails at connect
@pytest.mark.parametrize(
    "deployment",
    [pytest.param(name, marks=pytest.mark.rabbitmq) for name in ("amqp", "cluster+amqp")],
    indirect=True,
)
def test_a_broker_that_refuses_the_login_is_named_and_the_run_is_sent_later(
    deployment: Deployment, cluster: Client, tmp_path: Path
) -> None:
    assert deployment.broker_url is not None
    wrong = deployment.broker_url.replace("guest:guest", "guest:wrong")
    producer = Client(settings=replace(deployment.topology.settings(), broker_url=wrong))
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
