"""Network faults between workers, producers, Redis and RabbitMQ, put on by a proxy
(tests/fault_proxy.py).

A worker process talks to Redis through a `FaultProxy`; the producer (and, where the test needs
one, a second worker) talks to it directly or through a proxy of its own. Each test puts a fault
on a link while runs are under way and checks what DESIGN §4 promises: every run completes, each
step committed once (step numbers, a counter in the state, its log), every blocked call ends
(a publish to a silent RabbitMQ too), and a worker cut off from Redis stops vouching for its
messages, so another worker runs them once the visibility timeout has passed.
"""

from __future__ import annotations

import socket
import textwrap
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fault_proxy import FaultProxy
from rabbitmq_node import RabbitMQNode
from support import lines, settings_of, uid, wait_for
from worker_procs import WorkerProcess

from graphrunner import parse_graph
from graphrunner.client import Client, RunHandle
from graphrunner.cluster.transport.deadline import WATCHDOG, cut
from graphrunner.cluster.transport.messages import STEP_TASK, Outgoing
from graphrunner.embedded import EmbeddedRedis
from graphrunner.errors import BrokerUnavailable

VISIBILITY = "3"  # seconds: a partitioned worker's messages go elsewhere this long after it last vouched
STEPS = 6

TICKS = """
    id: t/ticks
    inputs: {tag: {type: string, required: true}}
    state:
      n: {type: integer, default: 0}
      log: {type: list, default: [], reducer: append}
    config: {start: add, max_steps: 100}
    nodes:
      add:
        action: {tool: python, params: {fn: "crash_targets:tick", args: {marker: MARKER, run: "${inputs.tag}", pause: PAUSE}}}
        retry: {max_attempts: 1}
        assign: {n: "${state.n + 1}", log: ["${state.n}"]}
        next: [{to: done, when: "state.n >= STEPS"}, {to: add}]
      done: {type: return, output: {n: "${state.n}", log: "${state.log}"}}
"""


def ticks_graph(marker: Path, pause: float) -> Any:
    text = textwrap.dedent(TICKS).replace("MARKER", str(marker)).replace("PAUSE", str(pause))
    return parse_graph(text.replace("STEPS", str(STEPS)))


@pytest.fixture
def proxy(private_redis: EmbeddedRedis) -> Iterator[FaultProxy]:
    port = int(private_redis.url.rsplit(":", 1)[1].split("/")[0])
    with FaultProxy(("127.0.0.1", port)) as fault_proxy:
        yield fault_proxy


@pytest.fixture
def fleet() -> Iterator[list[WorkerProcess]]:
    """The worker processes a test starts (`started`), stopped after it whatever happens."""
    workers: list[WorkerProcess] = []
    try:
        yield workers
    finally:
        for worker in workers:
            worker.stop()


def started(fleet: list[WorkerProcess], name: str, env: dict[str, Any], tmp_path: Path) -> WorkerProcess:
    """A worker process in `fleet`, ready."""
    fleet.append(worker := WorkerProcess(name, env, tmp_path, concurrency=2))
    worker.wait_ready()
    return worker


def envs(
    worker_env: dict[str, Any], redis_url: str, proxy: FaultProxy
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The environments of a worker behind the proxy and of one talking to Redis directly."""
    direct = {**worker_env, "GRAPHRUNNER_REDIS_URL": redis_url, "GRAPHRUNNER_VISIBILITY_TIMEOUT": VISIBILITY}
    return {**direct, "GRAPHRUNNER_REDIS_URL": proxy.url_for(redis_url)}, direct


def check_once(run: RunHandle, marker: Path, tag: str, timeout: float = 60) -> list[str]:
    """The run completed, each of its steps committed exactly once; the workers that ran them.

    Besides the step records, a fault may leave records of what happened around a step (a retry
    after the store timed out, a sweep that sent a stalled step again): allowed, never twice a
    committed step."""
    result = run.wait(timeout=timeout)
    assert result.status == "completed", (tag, result.error)
    assert result.output == {"n": STEPS, "log": list(range(STEPS))}
    taken = [s for s in result.steps if s["status"] in ("ok", "end")]
    assert [s["step"] for s in taken] == list(range(1, STEPS + 2)), result.steps
    assert {s["status"] for s in result.steps} <= {"ok", "end", "retry", "swept"}, result.steps
    assert len(lines(marker / f"ticks-{tag}")) >= STEPS  # actions run at least once
    return [str(s.get("worker")) for s in taken]


def behind(worker: WorkerProcess, marker: Path, tags: list[str]) -> bool:
    """A step of one of the runs `tags` ran on `worker`."""
    return any(worker.owns(int(pid)) for tag in tags for pid in lines(marker / f"ticks-{tag}"))


@dataclass
class Partitioned:
    """A partition in progress: the producer, the graph, the runs it submitted, and the worker
    that talks to Redis directly."""

    client: Client
    graph: Any  # a parsed graph (ticks_graph)
    runs: dict[str, RunHandle]
    direct: WorkerProcess


@contextmanager
def partitioned(
    redis_url: str,
    proxy: FaultProxy,
    worker_env: dict[str, Any],
    tmp_path: Path,
    fleet: list[WorkerProcess],
    count: int,
) -> Iterator[Partitioned]:
    """Two workers, one behind the proxy; `count` runs submitted and the proxy blackholed once the
    worker behind it took a step of one (its connections stay open and silent); the block starts
    once every run completed, each step once: the other worker ran what the cut one held."""
    proxied, direct = envs(worker_env, redis_url, proxy)
    client = Client(redis_url)
    try:
        workers = [started(fleet, "cut", proxied, tmp_path), started(fleet, "ok", direct, tmp_path)]
        graph = ticks_graph(tmp_path, 0.3)
        tags = [uid() for _ in range(count)]
        runs = {tag: client.submit(graph, {"tag": tag}) for tag in tags}
        wait_for(lambda: behind(workers[0], tmp_path, tags), 30, "a step on the worker behind the proxy")
        proxy.blackhole()
        for tag, run in runs.items():
            check_once(run, tmp_path, tag)
        yield Partitioned(client, graph, runs, workers[1])
    finally:
        client.close()


def test_a_worker_partitioned_from_redis_mid_run_stops_vouching_and_others_finish_its_runs(
    private_redis: EmbeddedRedis,
    proxy: FaultProxy,
    worker_env: dict[str, Any],
    tmp_path: Path,
    fleet: list[WorkerProcess],
) -> None:
    with partitioned(private_redis.url, proxy, worker_env, tmp_path, fleet, 6) as cut:
        proxy.heal()  # what it sent meanwhile arrives now: late commits are fenced off
        cut.direct.stop()
        again = uid()
        check_once(cut.client.submit(cut.graph, {"tag": again}), tmp_path, again)  # it recovered, alone
        for tag, run in cut.runs.items():
            check_once(run, tmp_path, tag)  # nothing it sent late changed a run


def test_a_worker_whose_connections_died_silently_in_a_partition_recovers(
    private_redis: EmbeddedRedis,
    proxy: FaultProxy,
    worker_env: dict[str, Any],
    tmp_path: Path,
    fleet: list[WorkerProcess],
) -> None:
    with partitioned(private_redis.url, proxy, worker_env, tmp_path, fleet, 4) as cut:
        proxy.heal(strand=True)  # its old connections never answer again; new ones do
        cut.direct.stop()
        again = uid()
        run = cut.client.submit(cut.graph, {"tag": again})
        check_once(run, tmp_path, again, timeout=90)  # every blocked call ended; it reconnected


def test_reset_storms_on_the_worker_and_producer_links_lose_and_repeat_nothing(
    private_redis: EmbeddedRedis,
    proxy: FaultProxy,
    worker_env: dict[str, Any],
    tmp_path: Path,
    fleet: list[WorkerProcess],
) -> None:
    proxied, _ = envs(worker_env, private_redis.url, proxy)
    port = int(private_redis.url.rsplit(":", 1)[1].split("/")[0])
    started(fleet, "stormy", proxied, tmp_path)
    with FaultProxy(("127.0.0.1", port)) as producer_link:
        client = Client(producer_link.url_for(private_redis.url), retry_seconds=30)
        try:
            graph = ticks_graph(tmp_path, 0.2)
            connected = proxy.accepted
            proxy.storm(every=0.5)  # every connection of the worker reset (RST) twice a second
            producer_link.storm(every=0.7)
            tags = [uid() for _ in range(6)]
            runs = {tag: client.submit(graph, {"tag": tag}) for tag in tags}
            halfway = lambda: all(len(lines(tmp_path / f"ticks-{t}")) >= STEPS // 2 for t in tags)  # noqa: E731
            wait_for(halfway, 60, "every run halfway through, in the storm")
            assert proxy.accepted > connected + 3  # the worker lost its connections and made new ones
            proxy.heal()
            producer_link.heal()
            for tag, run in runs.items():
                check_once(run, tmp_path, tag)
            assert len(client.list_runs("t/ticks", limit=100)) == len(tags)  # no submission doubled
        finally:
            client.close()


def test_latency_with_jitter_and_slow_closes_on_both_links(
    private_redis: EmbeddedRedis,
    proxy: FaultProxy,
    worker_env: dict[str, Any],
    tmp_path: Path,
    fleet: list[WorkerProcess],
) -> None:
    proxied, _ = envs(worker_env, private_redis.url, proxy)
    port = int(private_redis.url.rsplit(":", 1)[1].split("/")[0])
    proxy.latency(0.03, jitter=0.02)  # before the worker connects: all of its connections are slow
    proxy.slow_close(1.0)
    started(fleet, "slow", proxied, tmp_path)
    with FaultProxy(("127.0.0.1", port)) as producer_link:
        producer_link.latency(0.03, jitter=0.02)
        client = Client(producer_link.url_for(private_redis.url))
        try:
            graph = ticks_graph(tmp_path, 0.0)
            tags = [uid() for _ in range(4)]
            runs = {tag: client.submit(graph, {"tag": tag}) for tag in tags}
            for tag, run in runs.items():
                check_once(run, tmp_path, tag)
                assert len(lines(tmp_path / f"ticks-{tag}")) == STEPS  # no step ran twice: nothing timed out
        finally:
            client.close()


@pytest.mark.rabbitmq
def test_a_publish_to_a_silent_rabbitmq_is_bounded_and_the_next_one_takes_a_new_connection(
    rabbitmq: RabbitMQNode, private_redis: EmbeddedRedis
) -> None:
    host, port = rabbitmq.url.rsplit("@", 1)[1].split("/")[0].split(":")
    with FaultProxy((host, int(port))) as link, ThreadPoolExecutor(1) as pool:
        client = Client(
            settings=settings_of(redis_url=private_redis.url, broker_url=link.url_for(rabbitmq.url))
        )
        try:
            publisher = client.cluster.publisher
            send = publisher.encode(
                Outgoing(task=STEP_TASK, args=(uid(), 1, 0), queue=f"q-{uid()}", shadow="t")
            )
            publisher.publish(send)
            link.blackhole()  # the write goes out, no confirm comes back, nothing closes
            with pytest.raises(BrokerUnavailable):
                pool.submit(publisher.publish, send).result(timeout=90)  # bounded: it gave up
            link.heal(strand=True)  # the old connection stays dead; a new one works

            def taken() -> bool:  # refused at once for a few seconds after a publish gave up
                try:
                    pool.submit(publisher.publish, send).result(timeout=90)
                except BrokerUnavailable:
                    return False
                return True

            wait_for(taken, 60, "a publish on a new connection")
        finally:
            client.close()


def test_the_watchdog_cuts_a_connection_blocked_past_its_deadline(
    private_redis: EmbeddedRedis, proxy: FaultProxy
) -> None:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=60)
    connection = SimpleNamespace(_connection=SimpleNamespace(transport=SimpleNamespace(sock=sock)))
    try:
        proxy.blackhole()
        sock.sendall(b"PING\r\n")
        with WATCHDOG.watch(0.5, lambda: cut(connection)):
            assert sock.recv(64) == b""  # no answer ever comes: the cut ends the read
    finally:
        sock.close()
