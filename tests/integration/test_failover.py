"""Failover (DESIGN §4): a worker that dies at any instant loses no run and applies no step twice.

Worker processes here run with a short visibility timeout, stall time and sweep interval (a few
seconds instead of 20, 20 and 5), so the tests wait seconds, not half a minute; the figures with
the default settings are measured by `python -m benchmarks.failover`. Nothing here asserts how
fast anything happened: every wait is for a condition, with a generous deadline.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from support import lines, settings_of, uid, wait_for
from worker_procs import WorkerProcess

from graphrunner import parse_graph
from graphrunner.client import Client, RunHandle
from graphrunner.cluster.transport.app import RESTORE_MUTEX
from graphrunner.cluster.transport.envelope import Envelope
from graphrunner.cluster.transport.messages import STEP_TASK, Outgoing, StepMessage
from graphrunner.cluster.worker.runtime import WorkerRuntime
from graphrunner.embedded import EmbeddedRedis

FAST = {
    "GRAPHRUNNER_VISIBILITY_TIMEOUT": "2",
    "GRAPHRUNNER_STALL_AFTER": "3",
    "GRAPHRUNNER_SWEEP_INTERVAL": "1",
}


def env_for(worker_env: dict[str, Any], url: str, **extra: str) -> dict[str, Any]:
    return {**worker_env, "GRAPHRUNNER_REDIS_URL": url, **FAST, **extra}


def start(env: dict[str, Any], tmp_path: Path, concurrency: int = 1) -> WorkerProcess:
    worker = WorkerProcess(f"w-{uid()}", env, tmp_path, concurrency=concurrency)
    worker.wait_ready()
    return worker


def graph_of(text: str, tmp_path: Path) -> Any:
    return parse_graph(textwrap.dedent(text).replace("MARKER", str(tmp_path)))


def statuses(run: RunHandle) -> list[str]:
    return [record["status"] for record in run.steps()]


SLOW = """
    id: fail/slow
    config: {start: slow}
    nodes:
      slow:
        action: {tool: python, params: {fn: "crash_targets:slow_step", args: {marker: MARKER, seconds: 7}}}
        retry: {max_attempts: 1}
"""


def test_a_live_worker_vouches_for_a_step_longer_than_the_visibility_timeout(
    private_redis: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    env = env_for(worker_env, private_redis.url)
    workers = [start(env, tmp_path), start(env, tmp_path)]  # the idle one would take a restored message
    client = Client(private_redis.url)
    try:
        result = client.submit(graph_of(SLOW, tmp_path)).wait(timeout=90)
        assert result.status == "completed", result.error
        assert len(lines(tmp_path / "calls")) == 1  # never delivered again while its worker lived
    finally:
        client.close()
        for worker in workers:
            worker.stop()


WAITS = {
    "durable sleep": (
        """
        id: fail/sleep
        state: {log: {type: list, default: [], reducer: append}}
        config: {start: nap}
        nodes:
          nap: {action: {tool: sleep, params: {seconds: 3}}, assign: {log: [slept]}, next: after}
          after: {type: gate, assign: {log: [after]}}
        """,
        "sleeping",
    ),
    "retry backoff": (
        """
        id: fail/retry
        state: {log: {type: list, default: [], reducer: append}}
        config: {start: flaky}
        nodes:
          flaky:
            action: {tool: python, params: {fn: "crash_targets:flaky_once", args: {marker: MARKER}}}
            retry: {max_attempts: 3, initial: 3, jitter: 0, on: [transient]}
            assign: {log: [flaky]}
            next: after
          after: {type: gate, assign: {log: [after]}}
        """,
        "retry",
    ),
}


@pytest.mark.parametrize("kind", sorted(WAITS))
def test_a_step_waiting_on_a_timer_goes_on_when_its_worker_is_gone(
    kind: str, private_redis: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    text, record = WAITS[kind]
    env = env_for(worker_env, private_redis.url)
    first = start(env, tmp_path)
    client = Client(private_redis.url)
    second = None
    try:
        run = client.submit(graph_of(text, tmp_path))
        wait_for(lambda: record in statuses(run), 30, f"the {record} record")
        first.kill()  # it held no message: the wait is a timer in Redis, moved by any worker
        second = start(env, tmp_path)
        result = run.wait(timeout=60)
        assert result.status == "completed", result.error
        assert result.state["log"][-1] == "after"
        assert [r["step"] for r in result.steps if r["status"] in ("ok", "end")] == [1, 2]
    finally:
        client.close()
        first.kill()
        if second is not None:
            second.stop()


LOOP = """
    id: fail/loop
    inputs: {steps: {type: integer, required: true}}
    state: {n: {type: integer, default: 0}}
    config: {start: tick, max_steps: 1000}
    nodes:
      tick:
        action: {tool: python, params: {fn: "crash_targets:tick", args: {marker: MARKER, run: "${run.id}", pause: 0.02}}}
        assign: {n: "${state.n + 1}"}
        next: [{to: tick, when: "state.n < inputs.steps"}, {to: $end}]
"""


def test_workers_killed_over_and_over_lose_no_run_and_apply_no_step_twice(
    private_redis: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    env = env_for(worker_env, private_redis.url)
    workers = [start(env, tmp_path, concurrency=2) for _ in range(3)]
    client = Client(private_redis.url)
    chooser = random.Random(7)
    try:
        graph = graph_of(LOOP, tmp_path)
        runs = [client.submit(graph, {"steps": 40}) for _ in range(20)]
        for _ in range(4):  # SIGKILL a worker at some instant, start another
            time.sleep(1.5)
            victim = workers.pop(chooser.randrange(len(workers)))
            victim.kill()
            workers.append(start(env, tmp_path, concurrency=2))
        for run in runs:
            result = run.wait(timeout=180)
            assert result.status == "completed", result.error
            assert result.state["n"] == 40  # every transition applied exactly once
            assert [r["step"] for r in result.steps if r["status"] in ("ok", "end")] == list(range(1, 41))
            assert len(lines(tmp_path / f"ticks-{run.id}")) >= 40  # actions at least once
    finally:
        client.close()
        for worker in workers:
            worker.stop()


COUNTER = """
    id: fail/outbox
    state: {n: {type: integer, default: 0}}
    config: {start: add}
    nodes:
      add:
        type: gate
        assign: {n: "${state.n + 1}"}
        next: [{to: add, when: "state.n < 5"}, {to: $end}]
"""


@pytest.fixture
def broker_redis() -> Iterator[EmbeddedRedis]:
    """A second Redis, as the broker: the store's commits go through the outbox."""
    with EmbeddedRedis() as server:
        yield server


def test_runs_go_through_the_outbox_when_the_broker_is_another_redis(
    private_redis: EmbeddedRedis, broker_redis: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    env = env_for(worker_env, private_redis.url, GRAPHRUNNER_BROKER_URL=broker_redis.url)
    worker = start(env, tmp_path, concurrency=2)
    client = Client(private_redis.url, broker_url=broker_redis.url)
    try:
        assert not client.store.direct
        result = client.submit(graph_of(COUNTER, tmp_path)).wait(timeout=60)
        assert result.status == "completed" and result.state == {"n": 5}
        # everything committed is published: the worker that committed the last step's message
        # empties its outbox entry after publishing it, which may be after the run has finished
        wait_for(lambda: client.store.outbox(result.run_id) == [], 30, "the run's outbox to be empty")
        assert not client.store.redis.exists("graphrunner")  # type: ignore[attr-defined]  # no queue here
    finally:
        client.close()
        worker.stop()


def test_a_worker_killed_while_restoring_blocks_restores_for_seconds_not_minutes(
    private_redis: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    """Workers restore a dead worker's messages one at a time, under kombu's `unacked_mutex`
    lock. A worker SIGKILLed while it held it used to stop every restore for kombu's default
    5 minutes (a CI run lost two runs to it); the lock a worker takes now expires sooner."""
    worker = start(env_for(worker_env, private_redis.url), tmp_path)
    try:
        with (
            redis.Redis.from_url(private_redis.url, decode_responses=True) as client,
            client.monitor() as log,
        ):
            deadline = time.monotonic() + 60
            for entry in log.listen():
                words = entry["command"].split()
                if words[:2] == ["SET", "unacked_mutex"]:
                    break
                assert time.monotonic() < deadline, "no worker took the restore lock within 60 s"
    finally:
        worker.stop()
    assert words[words.index("PX") + 1] == str(RESTORE_MUTEX * 1000)  # the lock's time to live, ms


def test_an_outbox_message_of_a_worker_that_died_before_publishing_is_published_by_the_sweeper(
    private_redis: EmbeddedRedis,
    broker_redis: EmbeddedRedis,
    worker_env: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = settings_of(redis_url=private_redis.url, broker_url=broker_redis.url, stall_after=3)
    client, runtime = Client(settings=settings), WorkerRuntime(settings)
    worker = None
    try:
        run = client.submit(graph_of(COUNTER, tmp_path))
        broker = runtime.cluster.publisher.broker
        assert broker is not None and broker.redis.rpop(settings.queue) is not None  # taken here instead
        monkeypatch.setattr(
            runtime.cluster.publisher, "flush", lambda run_id, *sent: 0
        )  # dies before publishing
        assert runtime.executor.execute(StepMessage(run_id=run.id, step=0)).outcome == "committed"
        assert len(client.store.outbox(run.id)) == 1 and broker.depths([settings.queue])[settings.queue] == 0
        worker = start(
            env_for(worker_env, private_redis.url, GRAPHRUNNER_BROKER_URL=broker_redis.url), tmp_path
        )
        result = run.wait(timeout=60)
        assert result.status == "completed" and result.state == {"n": 5}
        swept = [r for r in result.steps if r["status"] == "swept"]
        assert [r["action"] for r in swept] == ["published_outbox"]
    finally:
        runtime.close()
        client.close()
        if worker is not None:
            worker.stop()


def test_a_commit_refused_by_redis_changes_nothing_and_the_step_comes_back(
    private_redis: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    env = env_for(worker_env, private_redis.url)
    worker = start(env, tmp_path)
    client = Client(private_redis.url, retry_seconds=30)
    raw: Any = client.store.redis  # type: ignore[attr-defined]
    try:
        graph = graph_of(CRASH_SLOW, tmp_path)
        run = client.submit(graph)
        wait_for(lambda: (tmp_path / "calls").exists(), 30, "the slow step to start")
        raw.config_set("maxmemory", 1)  # every write is refused (noeviction): the commit fails
        logged = lambda text: text in worker.log.read_text(errors="replace")  # noqa: E731
        wait_for(lambda: logged("goes back on its queue"), 30, "a refused commit")
        wait_for(lambda: logged("could not requeue message"), 30, "a refused requeue")
        assert worker.process.poll() is None  # the worker survives a Redis that refuses writes
        assert client.store.load_run(run.id).step == 1  # type: ignore[union-attr]  # nothing of step 2
        raw.config_set("maxmemory", 0)
        result = run.wait(timeout=90)
        assert result.status == "completed", result.error
        assert result.state["log"] == ["a", "slow", "c"]
        assert [r["step"] for r in result.steps if r["status"] in ("ok", "end")] == [1, 2, 3]
    finally:
        raw.config_set("maxmemory", 0)
        client.close()
        worker.stop()


CRASH_SLOW = """
    id: fail/refused
    state: {log: {type: list, default: [], reducer: append}}
    config: {start: a}
    nodes:
      a: {type: gate, assign: {log: [a]}, next: slow}
      slow:
        action: {tool: python, params: {fn: "crash_targets:slow_step", args: {marker: MARKER, seconds: 3}}}
        retry: {max_attempts: 1}
        assign: {log: [slow]}
        next: c
      c: {type: gate, assign: {log: [c]}}
"""


def pushes(raw: Any) -> int:
    """How many LPUSH commands Redis has run (also inside scripts): messages sent onto queues."""
    stats = raw.info("commandstats")
    return int(stats.get("cmdstat_lpush", {}).get("calls", 0))


def test_a_late_duplicate_is_dropped_and_sends_nothing(  # issue 12, defect 3
    private_redis: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    worker = start(env_for(worker_env, private_redis.url), tmp_path)  # one worker, one pool process
    client = Client(private_redis.url)
    raw: Any = client.store.redis  # type: ignore[attr-defined]
    try:
        before = pushes(raw)
        run = client.submit(graph_of(LOOP.replace("pause: 0.02", "pause: 0.05"), tmp_path), {"steps": 20})
        wait_for(lambda: client.store.load_run(run.id).step >= 3, 30, "step 3")  # type: ignore[union-attr]
        at = client.store.load_run(run.id).step  # type: ignore[union-attr]
        dup = Outgoing(task=STEP_TASK, args=(run.id, at), queue="graphrunner", shadow="dup")
        # a duplicate of the message of the step in flight (or next): with one worker and one pool
        # process it is taken right after the original commits, when it is one step behind
        raw.rpush("graphrunner", Envelope().encode(dup)[1])
        result = run.wait(timeout=60)
        assert result.status == "completed" and result.state["n"] == 20
        assert pushes(raw) - before == 20  # one message per step: the duplicate re-sent nothing
        assert len(lines(tmp_path / f"ticks-{run.id}")) == 20  # and ran nothing
    finally:
        client.close()
        worker.stop()


SLEEPY = """
    id: fail/backlog
    config: {start: slow}
    nodes:
      slow:
        action: {tool: python, params: {fn: "crash_targets:slow_step", args: {marker: MARKER, seconds: 2}}}
        retry: {max_attempts: 1}
"""


def test_sweeps_go_on_while_the_queue_is_backed_up(  # issue 12, defect 7
    private_redis: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    worker = start(env_for(worker_env, private_redis.url), tmp_path)  # one pool process, busy 2 s a step
    client = Client(private_redis.url)
    raw: Any = client.store.redis  # type: ignore[attr-defined]
    try:
        graph = graph_of(SLEEPY, tmp_path)
        runs = [client.submit(graph) for _ in range(6)]  # about 12 s of work for one pool process
        wait_for(lambda: (tmp_path / "calls").exists(), 30, "the first step to start")
        first = client.store.last_sweep() or 0
        # sweeps are not tasks on that queue: they go on (every second here) behind the backlog
        wait_for(lambda: (client.store.last_sweep() or 0) > first, 30, "a sweep behind the backlog")
        assert raw.llen("graphrunner") > 0  # the backlog is still there
        for run in runs:
            assert run.wait(timeout=120).status == "completed"
    finally:
        client.close()
        worker.stop()


NAP = """
    id: fail/nap
    config: {start: nap}
    nodes:
      nap: {action: {tool: sleep, params: {seconds: 1}}, next: done}
      done: {type: return}
"""


def test_graphrunner_beat_moves_due_timers_without_a_worker(
    private_redis: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    settings = settings_of(redis_url=private_redis.url)
    client, runtime = Client(settings=settings), WorkerRuntime(settings)
    raw: Any = client.store.redis  # type: ignore[attr-defined]
    beat = None
    try:
        run = client.submit(graph_of(NAP, tmp_path))
        assert raw.rpop(settings.queue) is not None  # the first step is taken here, not by a worker
        assert runtime.executor.execute(StepMessage(run_id=run.id, step=0)).outcome == "suspended"
        assert client.store.timers_armed() == 1 and raw.llen(settings.queue) == 0
        env = env_for(worker_env, private_redis.url)
        with (tmp_path / "beat.log").open("w") as log:
            command = [sys.executable, "-m", "graphrunner", "beat"]
            beat = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        wait_for(lambda: client.store.timers_armed() == 0, 30, "beat to move the due timer")
        assert raw.llen(settings.queue) == 1  # the step waits on its queue for a worker
        beat.send_signal(signal.SIGTERM)
        assert beat.wait(timeout=30) == 0
    finally:
        if beat is not None and beat.poll() is None:
            beat.kill()
        runtime.close()
        client.close()
