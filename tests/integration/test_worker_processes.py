"""Separate worker processes: many runs on two workers, and a worker killed in the middle of a step."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path
from typing import Any

import redis
from support import first_pid, multi_calls, wait_for
from worker_procs import WorkerProcess

from graphrunner import parse_graph
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis


def start_workers(count: int, env: dict[str, Any], tmp_path: Path, **kwargs: Any) -> list[WorkerProcess]:
    workers = [WorkerProcess(f"w{i}", env, tmp_path, **kwargs) for i in range(count)]
    for worker in workers:
        worker.wait_ready()
    return workers


COUNTER = """
    id: t/counter
    inputs: {k: {type: integer, required: true}}
    state:
      n: {type: integer, default: 0}
      log: {type: list, default: [], reducer: append}
    config: {start: add, max_steps: 100}
    nodes:
      add:
        action: {tool: echo, params: {n: "${state.n}"}}
        assign: {n: "${result.n + inputs.k}", log: ["${result.n}"]}
        next: [{to: done, when: "state.n >= inputs.k * 5"}, {to: add}]
      done: {type: return, output: {n: "${state.n}", log: "${state.log}"}}
"""


def test_two_worker_processes_fifty_concurrent_runs(
    private_redis: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    env = {**worker_env, "GRAPHRUNNER_REDIS_URL": private_redis.url}
    workers = start_workers(2, env, tmp_path, concurrency=2)
    client = Client(private_redis.url)
    broker = redis.Redis.from_url(private_redis.url)
    try:
        before = multi_calls(broker)
        graph = parse_graph(textwrap.dedent(COUNTER))
        runs = [(k, client.submit(graph, {"k": k})) for k in range(1, 51)]
        for k, run in runs:
            result = run.wait(timeout=120)
            assert result.status == "completed", (k, result.error)
            assert result.output == {"n": 5 * k, "log": [i * k for i in range(5)]}
            steps = [s["step"] for s in result.steps]
            assert steps == list(range(1, 7))  # every step committed exactly once, in order
        hosts = {s["worker"] for _, run in runs for s in run.steps()}
        assert len(hosts) >= 2
        # each step's commit acknowledged its message (transport/acks.py): kombu's MULTI to record
        # each of the 300 messages, none to acknowledge them, and nothing left unacknowledged
        wait_for(lambda: broker.hlen("unacked") == 0, 30, "every message acknowledged")
        assert multi_calls(broker) - before < 1.5 * 300
    finally:
        broker.close()
        client.close()
        for worker in workers:
            worker.stop()


CRASH = """
    id: t/crash
    state: {log: {type: list, default: [], reducer: append}}
    config: {start: a}
    nodes:
      a: {type: gate, assign: {log: [a]}, next: slow}
      slow:
        action: {tool: python, params: {fn: "crash_targets:slow_step", args: {marker: MARKER, seconds: 4}}}
        retry: {max_attempts: 1}
        assign: {log: [slow]}
        next: c
      c: {type: gate, assign: {log: [c]}}
"""


def test_a_worker_killed_mid_step_and_the_run_completes_exactly_once(
    private_redis: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    env = {**worker_env, "GRAPHRUNNER_REDIS_URL": private_redis.url, "GRAPHRUNNER_VISIBILITY_TIMEOUT": "3"}
    workers = start_workers(2, env, tmp_path)
    client = Client(private_redis.url)
    try:
        graph = parse_graph(textwrap.dedent(CRASH).replace("MARKER", str(tmp_path)))
        run = client.submit(graph)
        calls = tmp_path / "calls"
        pid = first_pid(calls, 30)
        victim = next(w for w in workers if w.owns(pid))
        victim.kill()  # in the middle of the slow step, before its commit
        result = run.wait(timeout=90)
        assert result.status == "completed", result.error
        assert result.state["log"] == ["a", "slow", "c"]  # each transition applied exactly once
        assert [(s["step"], s["node"]) for s in result.steps] == [(1, "a"), (2, "slow"), (3, "c")]
        runners = [int(line.split()[0]) for line in calls.read_text().splitlines()]
        assert len(runners) == 2 and not victim.owns(runners[1])  # the step ran again on the survivor
    finally:
        client.close()
        for worker in workers:
            worker.stop()


def test_a_redis_restart_mid_step_loses_nothing(worker_env: dict[str, Any], tmp_path: Path) -> None:
    with EmbeddedRedis(appendonly=True) as redis_server:
        env = {**worker_env, "GRAPHRUNNER_REDIS_URL": redis_server.url}
        workers = start_workers(1, env, tmp_path)
        client = Client(redis_server.url, retry_seconds=30)
        try:
            graph = parse_graph(
                textwrap.dedent(CRASH).replace("MARKER", str(tmp_path)).replace("seconds: 4", "seconds: 2")
            )
            run = client.submit(graph)
            calls = tmp_path / "calls"
            deadline = time.monotonic() + 30
            while not calls.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            redis_server.restart()  # while the slow step runs; its commit must wait for Redis
            result = run.wait(timeout=90)
            assert result.status == "completed", result.error
            assert result.state["log"] == ["a", "slow", "c"]
            assert [s["step"] for s in result.steps] == [1, 2, 3]
        finally:
            client.close()
            for worker in workers:
                worker.stop()
