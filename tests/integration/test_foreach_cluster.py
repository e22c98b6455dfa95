"""Foreach on the cluster: parallel items as chords, sequential items checkpointed, real Redis and workers."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support import lines, wait_for
from worker_procs import WorkerProcess

from graphrunner import Graph, RunResult, engine, parse_graph
from graphrunner.client import Client, RunHandle
from graphrunner.cluster.runs.items import call_payload
from graphrunner.cluster.transport.messages import ITEM_TASK, STEP_TASK, ItemMessage, StepMessage
from graphrunner.cluster.transport.signing import Signer
from graphrunner.cluster.worker.runtime import WorkerRuntime
from graphrunner.embedded import EmbeddedRedis
from graphrunner.engine import ActionCall
from graphrunner.errors import WaitTimeout
from graphrunner.settings import Settings
from graphrunner.store import RedisStore

HERE = Path(__file__).resolve().parent


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def foreach_graph(
    action: str,
    *,
    parallel: bool = True,
    error_mode: str = "fail",
    extra: str = "",
) -> Graph:
    """A graph whose node `fan` runs `action` (a python tool call on `x`) for every item of `inputs.xs`."""
    text = f"""
        id: {unique("t/foreach")}
        inputs: {{xs: {{type: any}}}}
        state:
          out: {{type: list, default: [], reducer: append}}
        config: {{start: fan, error_mode: {error_mode}}}
        nodes:
          fan:
            type: foreach
            over: "${{inputs.xs}}"
            as: x
            parallel: {str(parallel).lower()}
            {extra}
            action: {{tool: python, params: {action}}}
            collect: out
            assign: {{count: "${{result.count}}", failed: "${{result.failed.map(f, f.index)}}"}}
            next: done
          done: {{type: return, output: {{out: "${{state.out}}"}}}}
    """
    return parse_graph(textwrap.dedent(text), file="foreach.yaml")


def square(value: int) -> dict[str, int]:
    return {"value": value, "square": value * value}


def item_keys(client: Client, run_id: str) -> list[str]:
    """The run's foreach item hashes still in Redis."""
    return sorted(client.store.redis.scan_iter(match=f"gr:run:{{{run_id}}}:items:*"))


def item_writes(client: Client) -> int:
    """How many item records (HSETNX) the Redis server has taken so far."""
    stats = client.store.redis.info("commandstats")
    return int(stats.get("cmdstat_hsetnx", {}).get("calls", 0))


def assert_agrees(distributed: RunResult, local: RunResult) -> None:
    assert distributed.status == local.status
    assert distributed.state == local.state
    assert distributed.output == local.output
    assert distributed.error == local.error
    assert distributed.errors == local.errors
    assert distributed.path == local.path


def wait_watching(handle: RunHandle, timeout: float) -> tuple[RunResult, list[dict[str, Any]]]:
    """Poll the run until it finishes; return its result and every distinct wait it was seen in."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        snap = handle.snapshot()
        if snap.wait is not None and snap.wait not in seen:
            seen.append(dict(snap.wait))
        if snap.status.finished:
            return handle.result(), seen
        time.sleep(0.01)
    raise TimeoutError(f"run {handle.id} did not finish within {timeout}s")


@pytest.fixture(scope="module")
def wide_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    """A private Redis and a worker process of 4 pool processes: room for more items than max_concurrency.

    A process, not a second in-thread worker: Celery keeps one worker's task table per process, so
    a second in-thread worker would take over the `cluster` fixture's messages.
    """
    helpers = [str(HERE), str(HERE.parent / "unit"), os.environ.get("PYTHONPATH", "")]
    with EmbeddedRedis() as server, Client(server.url) as client:
        env = {
            **os.environ,
            "GRAPHRUNNER_REDIS_URL": server.url,
            "PYTHONPATH": os.pathsep.join(helpers),
            "GRAPHRUNNER_QUIET": "1",
            "PYTHONUNBUFFERED": "1",
        }
        worker = WorkerProcess("wide", env, tmp_path_factory.mktemp("wide"), concurrency=4)
        try:
            worker.wait_ready()
            yield client
        finally:
            worker.stop()


# -- 1. failing items: error_mode and tolerated_failures, the cluster agrees with in-process ----------

FAIL_ON = '{fn: "foreach_targets:fail_on", args: {value: "${x}", bad: BAD}}'
XS = list(range(10))

FAILURE_CASES = [
    pytest.param("fail", None, [3, 7], "failed", id="fail"),
    pytest.param("continue", None, [3, 7], "completed_with_errors", id="continue"),
    pytest.param("fail", "2", [3, 7], "completed", id="tolerated-2-within"),
    pytest.param("fail", "2", [1, 3, 7], "failed", id="tolerated-2-beyond"),
    pytest.param("fail", '"20%"', [3, 7], "completed", id="tolerated-20pc-within"),
    pytest.param("fail", '"20%"', [1, 3, 7], "failed", id="tolerated-20pc-beyond"),
]


@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "sequential"])
@pytest.mark.parametrize(("mode", "tolerated", "bad", "status"), FAILURE_CASES)
def test_items_that_fail_follow_error_mode_and_tolerance(
    cluster: Client, parallel: bool, mode: str, tolerated: str | None, bad: list[int], status: str
) -> None:
    extra = f"tolerated_failures: {tolerated}" if tolerated is not None else ""
    graph = foreach_graph(FAIL_ON.replace("BAD", str(bad)), parallel=parallel, error_mode=mode, extra=extra)
    run = cluster.submit(graph, {"xs": XS})
    distributed = run.wait(timeout=30)
    local = graph.invoke_sync({"xs": XS})
    assert distributed.status == status, distributed.error
    assert_agrees(distributed, local)
    good = [square(x) for x in XS if x not in bad]
    if status == "failed":
        assert distributed.error is not None and distributed.error.node == "fan"
        message = distributed.error.message
        assert f"first, item {bad[0]}: " in message and f"value {bad[0]} is bad" in message
        allowed = {None: 0, "2": 2, '"20%"': 2}[tolerated]
        failed = len(bad) if parallel else allowed + 1  # a sequential foreach stops at the failure
        # counts and tolerance are of the whole list, also when a sequential foreach stopped early
        assert message.startswith(f"{failed} of 10 items failed (tolerated {allowed}); ")
        assert distributed.state["out"] == []  # nothing collected from a failed node
    else:
        assert distributed.state["out"] == good  # the successful items, in item order
        assert distributed.state["failed"] == bad and distributed.state["count"] == 10
        assert distributed.output == {"out": good}
    if mode == "continue":
        assert distributed.errors_suppressed == len(bad)
        assert [(e.node, e.error.index) for e in distributed.errors] == [("fan", i) for i in bad]
        assert all(f"value {e.error.index} is bad" in e.error.message for e in distributed.errors)
    else:
        assert distributed.errors == []
    assert item_keys(cluster, run.id) == []  # the item results are dropped once the step commits


# -- 2. item order and max_concurrency ---------------------------------------------------------------

TIMED = '{fn: "foreach_targets:timed", args: {value: "${x}", folder: "FOLDER", seconds: "${double(4 - index) * 0.15}"}}'


def spans(folder: Path) -> dict[int, list[float]]:
    """Item -> [start, end] from the `timed` log."""
    found: dict[int, list[float]] = {}
    for line in lines(folder / "times"):
        value, what, at = line.split()
        found.setdefault(int(value), [0.0, 0.0])[what == "end"] = float(at)
    return found


def most_overlapping(intervals: list[list[float]]) -> int:
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    running = peak = 0
    for _, delta in events:  # at equal times an end (-1) sorts before a start (+1)
        running += delta
        peak = max(peak, running)
    return peak


def test_results_are_collected_in_item_order_when_items_finish_out_of_order(
    wide_cluster: Client, tmp_path: Path
) -> None:
    graph = foreach_graph(TIMED.replace("FOLDER", str(tmp_path)))
    result = wide_cluster.submit(graph, {"xs": [0, 1, 2, 3]}).wait(timeout=30)
    assert result.status == "completed", result.error
    assert result.state["out"] == [square(x) for x in range(4)]
    times = spans(tmp_path)
    finish_order = sorted(times, key=lambda i: times[i][1])
    assert finish_order != sorted(finish_order)  # the items did finish out of item order


def test_max_concurrency_bounds_the_items_in_flight(wide_cluster: Client, tmp_path: Path) -> None:
    action = '{fn: "foreach_targets:timed", args: {value: "${x}", folder: "FOLDER", seconds: 0.3}}'
    graph = foreach_graph(action.replace("FOLDER", str(tmp_path)), extra="max_concurrency: 2")
    xs = list(range(7))
    result, waits = wait_watching(wide_cluster.submit(graph, {"xs": xs}), timeout=30)
    assert result.status == "completed", result.error
    assert result.state["out"] == [square(x) for x in xs]
    times = spans(tmp_path)
    assert sorted(times) == xs
    # the worker has 4 threads, so more than 2 items would overlap if max_concurrency were ignored
    assert most_overlapping(list(times.values())) == 2
    chunks = [(w.get("next", 0), w["upto"]) for w in waits if w["kind"] == "foreach"]
    assert chunks and set(chunks) <= {(0, 2), (2, 4), (4, 6), (6, 7)}
    assert all(w["total"] == 7 for w in waits if w["kind"] == "foreach")


# -- 3. an item delivered twice is counted once -------------------------------------------------------


def item_message(
    graph: Graph, run_id: str, tag: str, index: int, xs: list[int], store: RedisStore
) -> ItemMessage:
    """The item message a parallel foreach of `graph` would send for item `index`, of a run
    recorded as running (item tasks skip the items of runs that are not running)."""
    now = datetime.now(UTC)
    snap = engine.begin(graph, {"xs": xs}, run_id=run_id)
    store.create_run(snap, "test")
    plan = engine.prepare(graph, snap, now)
    assert plan.items is not None
    call = engine.item_call(graph.nodes["fan"], snap, index, plan.items[index], now)
    assert isinstance(call, ActionCall)
    payload = {
        "run_id": run_id,
        "graph_id": graph.id,
        "graph_hash": graph.content_hash,
        "step": 1,
        "tag": tag,
        "index": index,
        "call": call_payload(call),
    }
    return ItemMessage.model_validate(Signer.of(Settings(), store).sign(payload))  # as a worker signs it


STAMPED = '{fn: "foreach_targets:stamped", args: {value: "${x}", folder: "FOLDER"}}'


def test_an_item_run_twice_is_recorded_once_and_the_first_record_stands(
    cluster: Client, worker_runtime: WorkerRuntime, tmp_path: Path
) -> None:
    graph = foreach_graph(STAMPED.replace("FOLDER", str(tmp_path)))
    run_id, tag = unique("twice"), "1.1.feedbeef"
    msg = item_message(graph, run_id, tag, 1, [10, 11, 12], cluster.store)
    for _ in range(2):  # the same message, delivered again
        worker_runtime.items.execute(msg, queue="graphrunner", shadow="t:item")
    assert len(lines(tmp_path / "calls-11")) == 2  # it ran twice (at least once) ...
    assert cluster.store.count_items(run_id, tag) == 1  # ... and is counted once
    first, stored, last = list(cluster.store.item_records(run_id, tag, 3))
    assert first is None and last is None and stored is not None
    timing = {k: stored.pop(k) for k in ("at", "ms", "worker")}  # when, how long and where it ran
    assert stored == {
        "ok": True,
        "attempts": 1,
        "result": {"value": 11, "call": 1},
    }  # the first record stands
    assert timing["at"] > 0 and timing["ms"] >= 0 and timing["worker"]
    cluster.store.drop_items(run_id, tag)


def test_an_item_task_sent_twice_through_the_broker_is_counted_once(
    cluster: Client, worker_runtime: WorkerRuntime, tmp_path: Path
) -> None:
    graph = foreach_graph(STAMPED.replace("FOLDER", str(tmp_path)))
    run_id, tag = unique("twice-broker"), "1.1.cafebabe"
    payload = item_message(graph, run_id, tag, 0, [20, 21], cluster.store).model_dump()
    for _ in range(2):
        worker_runtime.app.send_task(ITEM_TASK, args=[payload], queue="graphrunner")
    ran_twice = lambda: len(lines(tmp_path / "calls-20")) == 2  # noqa: E731
    wait_for(lambda: ran_twice() and cluster.store.count_items(run_id, tag) >= 1, 30, "both item tasks")
    assert cluster.store.count_items(run_id, tag) == 1
    [record] = list(cluster.store.item_records(run_id, tag, 1))
    assert record is not None and record["ok"] is True
    assert record["result"]["value"] == 20 and record["result"]["call"] in (1, 2)
    cluster.store.drop_items(run_id, tag)


# -- 4. a worker killed during a 500-item parallel foreach -----------------------------------------------

MARKED = '{fn: "foreach_targets:marked", args: {value: "${x}", folder: "FOLDER", seconds: 0.01}}'


def start_workers(count: int, env: dict[str, Any], tmp_path: Path, concurrency: int) -> list[WorkerProcess]:
    workers = [WorkerProcess(f"w{i}", env, tmp_path, concurrency=concurrency) for i in range(count)]
    for worker in workers:
        worker.wait_ready()
    return workers


def test_a_worker_killed_during_a_500_item_parallel_foreach(
    private_redis: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    env = {**worker_env, "GRAPHRUNNER_REDIS_URL": private_redis.url, "GRAPHRUNNER_VISIBILITY_TIMEOUT": "3"}
    workers = start_workers(2, env, tmp_path, concurrency=2)
    client = Client(private_redis.url)
    try:
        hold = tmp_path / "hold"
        action = MARKED.replace("seconds: 0.01", f'seconds: 0.01, hold: "{hold}"')
        graph = foreach_graph(action.replace("FOLDER", str(tmp_path)))
        xs = list(range(500))
        run = client.submit(graph, {"xs": xs})
        calls, held = tmp_path / "calls", tmp_path / "held"
        wait_for(lambda: len(lines(calls)) >= 100, 60, "100 items to run")
        victim, survivor = workers
        # The victim's next items block, so it is killed with both pool processes inside an item
        # and its consumer not fetching (prefetch is full): killed between fetching a message and
        # recording it as unacknowledged, a worker loses the message (see the BUG test below).
        hold.write_text(str(victim.process.pid), encoding="utf-8")
        wait_for(lambda: len(lines(held)) == 2, 30, "both of the victim's pool processes to block")
        victim.kill()
        blocked = [int(line.split()[0]) for line in lines(held)]
        assert len({line.split()[0] for line in lines(calls)}) < 500  # killed mid-way
        result = run.wait(timeout=60)
        assert result.status == "completed", result.error
        assert result.state["out"] == [square(x) for x in xs]  # each item exactly once, in item order
        assert result.state["count"] == 500 and result.state["failed"] == []
        ran = [(int(value), int(pid)) for value, pid in (line.split() for line in lines(calls))]
        assert {value for value, _ in ran} == set(xs)  # at least once each (a few may run twice) ...
        for x in blocked:  # ... the killed ones again, on the survivor
            assert [survivor.owns(pid) for value, pid in ran if value == x] == [False, True]
        assert item_keys(client, run.id) == []
    finally:
        client.close()
        for worker in workers:
            worker.stop()


def test_a_lost_item_message_is_sent_again_by_the_sweeper(
    private_redis: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    # kombu's Redis transport takes a message with BRPOP and only then records it as
    # unacknowledged (two round trips), so a worker SIGKILLed in between loses the message.
    # Here the lost message is removed from the queue by hand: the chord never fires, and
    # only the sweeper (stalled after 1 s here) finds the missing item and sends it again.
    quick = {"GRAPHRUNNER_STALL_AFTER": "1", "GRAPHRUNNER_SWEEP_INTERVAL": "3600"}  # the test sweeps
    env = {**worker_env, "GRAPHRUNNER_REDIS_URL": private_redis.url, **quick}
    settings = replace(Settings.from_env(), stall_after=1, sweep_interval=3600).with_redis(private_redis.url)
    client, runtime = Client(settings=settings), WorkerRuntime(settings)
    workers: list[WorkerProcess] = []
    try:
        graph = foreach_graph(MARKED.replace("FOLDER", str(tmp_path)))
        run = client.submit(graph, {"xs": [0, 1, 2, 3, 4]})
        queue, broker = client.settings.queue, client.store.redis  # type: ignore[attr-defined]
        broker.delete(queue)  # the first step's message: taken here instead, by this test's executor
        report = runtime.executor.execute(StepMessage(run_id=run.id, step=0))  # the fan-out
        assert report.outcome == "suspended"
        [lost] = [m for m in broker.lrange(queue, 0, -1) if item_index(m) == 2]
        assert broker.lrem(queue, 1, lost) == 1  # taken by a worker that was killed before recording it
        workers = start_workers(1, env, tmp_path, concurrency=2)
        wait_for(lambda: len(lines(tmp_path / "calls")) == 4, 30, "the other items to run")
        time.sleep(1.5)  # no item recorded for longer than GRAPHRUNNER_STALL_AFTER
        with contextlib.suppress(WaitTimeout):
            run.wait(timeout=1)  # not yet: the chord waits for the lost item
        assert run.status() == "running"
        report = client.sweep()
        assert [(r.run_id, r.action) for r in report.repaired] == [(run.id, "resent_items")]
        result = run.wait(timeout=30)
        assert result.status == "completed"
        assert result.state["out"] == [square(x) for x in range(5)]
        assert sorted(line.split()[0] for line in lines(tmp_path / "calls")) == [str(x) for x in range(5)]
        assert any(r["status"] == "swept" for r in run.steps())
    finally:
        runtime.close()
        client.close()
        for worker in workers:
            worker.stop()


def item_index(raw: str) -> int | None:
    """The foreach item index an item message on the queue carries (None for other messages)."""
    envelope = json.loads(raw)
    if envelope["headers"].get("task") != ITEM_TASK:
        return None
    args = json.loads(base64.b64decode(envelope["body"]))[0]
    return int(args[0]["index"])


# -- 5. a sequential foreach interrupted by a killed worker resumes at its checkpoint ---------------------

# items of 0.3 s: the task hands the loop on to a fresh task after 1 s (a third of the visibility timeout)
BLOCK_ONCE = (
    '{fn: "foreach_targets:block_once", args: {value: "${x}", folder: "FOLDER", block_at: 5, seconds: 0.3}}'
)


def test_a_sequential_foreach_resumes_after_a_killed_worker_without_repeating_items(
    private_redis: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    env = {**worker_env, "GRAPHRUNNER_REDIS_URL": private_redis.url, "GRAPHRUNNER_VISIBILITY_TIMEOUT": "3"}
    workers = start_workers(2, env, tmp_path, concurrency=1)
    client = Client(private_redis.url)
    try:
        graph = foreach_graph(BLOCK_ONCE.replace("FOLDER", str(tmp_path)), parallel=False)
        xs = list(range(8))
        run = client.submit(graph, {"xs": xs})
        marker = tmp_path / "blocked"
        wait_for(lambda: bool(lines(marker)), 30, "item 5 to block")
        pid = int(lines(marker)[0])
        victim = next(w for w in workers if w.owns(pid))
        survivor = next(w for w in workers if w is not victim)
        wait = run.snapshot().wait
        assert wait is not None and (wait.kind, wait.next, wait.total) == ("items", 5, 8)
        victim.kill()  # while item 5 blocks, before its result is recorded
        result = run.wait(timeout=60)
        assert result.status == "completed", result.error
        assert result.state["out"] == [square(x) for x in xs]
        runs_per_item = {x: lines(tmp_path / f"calls-{x}") for x in xs}
        assert all(len(runs_per_item[x]) == 1 for x in range(5))  # finished items never ran again
        first, again = (int(p) for p in runs_per_item[5])  # the interrupted item ran again ...
        assert first == pid and survivor.owns(again)  # ... on the survivor
        assert all(len(runs_per_item[x]) >= 1 for x in (6, 7))  # and then the rest
    finally:
        client.close()
        for worker in workers:
            worker.stop()


# -- 6. bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize("over", ["abc", {"a": 1}, 7, None])
def test_over_that_is_not_a_list_fails_the_run_naming_the_node(cluster: Client, over: Any) -> None:
    graph = foreach_graph(FAIL_ON.replace("BAD", "[]"))
    result = cluster.submit(graph, {"xs": over}).wait(timeout=30)
    assert result.status == "failed"
    assert result.error is not None and result.error.node == "fan"
    assert "node 'fan': over must resolve to a list" in result.error.message
    assert_agrees(result, graph.invoke_sync({"xs": over}))


UNSERIALIZABLE = '{fn: "foreach_targets:unserializable", args: {value: "${x}", bad: [1]}}'


@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "sequential"])
def test_an_item_result_that_is_not_json_fails_the_item_and_the_worker_keeps_working(
    cluster: Client, parallel: bool
) -> None:
    graph = foreach_graph(UNSERIALIZABLE, parallel=parallel)
    result = cluster.submit(graph, {"xs": [0, 1, 2]}).wait(timeout=30)
    assert result.status == "failed"
    assert result.error is not None and result.error.node == "fan"
    message = result.error.message
    assert "first, item 1: node 'fan' (item 1): " in message and "not JSON-serializable" in message
    assert_agrees(result, graph.invoke_sync({"xs": [0, 1, 2]}))
    after = cluster.submit(graph, {"xs": [0, 2, 3]}).wait(timeout=30)  # the worker is still taking runs
    assert after.status == "completed" and after.state["out"] == [square(0), square(2), square(3)]


def test_a_not_json_item_under_continue_is_a_suppressed_error(cluster: Client) -> None:
    graph = foreach_graph(UNSERIALIZABLE, error_mode="continue")
    result = cluster.submit(graph, {"xs": [0, 1, 2]}).wait(timeout=30)
    assert result.status == "completed_with_errors"
    [error] = result.errors
    assert error.node == "fan" and error.error.index == 1
    assert error.error.error_type == "UnserializableResult"
    assert "node 'fan' (item 1)" in error.error.message
    assert "not JSON-serializable" in error.error.message
    assert result.state["out"] == [square(0), square(2)]
    assert_agrees(result, graph.invoke_sync({"xs": [0, 1, 2]}))


# -- beyond: items that cannot be sent, and items that retry after a backoff -----------------------------

BAD_PARAMS = '{fn: "foreach_targets:square", args: {value: "${x.v}"}}'


@pytest.mark.parametrize(
    ("parallel", "extra"),
    [(True, ""), (True, "max_concurrency: 1"), (False, "")],
    ids=["parallel", "parallel-one-at-a-time", "sequential"],
)
@pytest.mark.parametrize(
    "xs",
    [[{"v": 1}, {}, {"v": 3}], [{}, {}, {"v": 3}], [{}, {}]],
    ids=["one-bad", "two-bad", "all-bad"],
)
def test_items_whose_params_cannot_be_rendered_fail_and_the_rest_run(
    cluster: Client, parallel: bool, extra: str, xs: list[dict[str, int]]
) -> None:
    # chunks with some, one or no item to send (a chord, a single linked task, the join alone)
    graph = foreach_graph(BAD_PARAMS, parallel=parallel, error_mode="continue", extra=extra)
    result = cluster.submit(graph, {"xs": xs}).wait(timeout=30)
    assert result.status == "completed_with_errors", result.error
    assert result.state["out"] == [square(x["v"]) for x in xs if "v" in x]
    assert [e.error.index for e in result.errors] == [i for i, x in enumerate(xs) if "v" not in x]
    assert all(e.node == "fan" for e in result.errors)
    assert_agrees(result, graph.invoke_sync({"xs": xs}))


FLAKY = '{fn: "foreach_targets:flaky_once", args: {value: "${x}", folder: "FOLDER", fail_for: [1, 2]}}'


@pytest.mark.parametrize(
    ("parallel", "batch"),
    [(True, ""), (True, "batch_size: 2"), (False, "")],
    ids=["parallel", "parallel-batched", "sequential"],
)
def test_items_retried_after_a_backoff_longer_than_the_inline_wait(
    cluster: Client, tmp_path: Path, parallel: bool, batch: str
) -> None:
    # a 1.5 s backoff is longer than the worker sleeps in a task: the item is sent again later (a
    # batched one alone: items 1 and 2 retry, their batch-mates 0 and 3 run once)
    retry = f"retry: {{max_attempts: 3, initial: 1.5, jitter: 0}}\n            {batch}"
    graph = foreach_graph(FLAKY.replace("FOLDER", str(tmp_path)), parallel=parallel, extra=retry)
    result = cluster.submit(graph, {"xs": [0, 1, 2, 3]}).wait(timeout=30)
    assert result.status == "completed", result.error
    assert result.state["out"] == [square(x) for x in range(4)]
    assert [len(lines(tmp_path / f"calls-{x}")) for x in range(4)] == [1, 2, 2, 1]


# -- batches, and the join sent by the item that records a chunk's last item ------------------------------


@pytest.mark.parametrize(("mode", "status"), [("continue", "completed_with_errors"), ("fail", "failed")])
def test_batched_items_keep_their_own_results_and_failures(cluster: Client, mode: str, status: str) -> None:
    graph = foreach_graph(FAIL_ON.replace("BAD", "[3, 7]"), error_mode=mode, extra="batch_size: 3")
    result = cluster.submit(graph, {"xs": XS}).wait(timeout=30)
    assert result.status == status, result.error
    assert_agrees(result, graph.invoke_sync({"xs": XS}))  # in-process: the same, batch_size or not
    if mode == "continue":  # items 3 and 7 failed, their batch-mates (2, 4, 5; 6, 8) did not
        assert result.state["out"] == [square(x) for x in XS if x not in (3, 7)]
        assert [e.error.index for e in result.errors] == [3, 7]
    else:
        assert result.error is not None and result.error.message.startswith("2 of 10 items failed")


def queued(raw: str) -> tuple[str, list[Any]]:
    """The task and the arguments of a message waiting on a queue."""
    envelope = json.loads(raw)
    return envelope["headers"]["task"], json.loads(base64.b64decode(envelope["body"]))[0]


def test_the_join_is_sent_once_by_the_last_item_recorded_and_again_by_the_sweeper_when_lost(
    private_redis: EmbeddedRedis, tmp_path: Path
) -> None:
    settings = replace(Settings.from_env(), stall_after=1, sweep_interval=3600).with_redis(private_redis.url)
    client, runtime = (
        Client(settings=settings),
        WorkerRuntime(settings),
    )  # no worker: this test takes the messages
    try:
        graph = foreach_graph(MARKED.replace("FOLDER", str(tmp_path)), extra="batch_size: 2")
        run = client.submit(graph, {"xs": [0, 1, 2, 3, 4]})
        queue, broker = settings.queue, client.store.redis  # type: ignore[attr-defined]
        broker.delete(queue)  # the first step's message, taken here instead
        assert runtime.executor.execute(StepMessage(run_id=run.id, step=0)).outcome == "suspended"
        sent = [queued(raw) for raw in reversed(broker.lrange(queue, 0, -1))]  # in the order sent
        broker.delete(queue)
        assert {task for task, _ in sent} == {ITEM_TASK}  # the items only: no chord, no join yet
        items = [ItemMessage.parse(args, {}) for _, args in sent]
        assert [[m.index, *(b.index for b in m.batch)] for m in items] == [[0, 1], [2, 3], [4]]
        # the last message first, then every message twice (redelivered): items [2, 3] complete it
        for msg in (items[2], items[0], items[0], items[1], items[1], items[2]):
            runtime.items.execute(msg, queue=queue, shadow="t:item")
        [(task, args)] = [queued(raw) for raw in broker.lrange(queue, 0, -1)]
        assert (task, args) == (STEP_TASK, [run.id, 0, 1])  # the join, sent once
        broker.delete(queue)  # ... and lost: its worker died before sending it, say
        time.sleep(1.5)  # no item recorded for longer than GRAPHRUNNER_STALL_AFTER
        assert [(r.run_id, r.action) for r in client.sweep().repaired] == [(run.id, "resent_join")]
        while raw := broker.rpop(queue):  # the join again, then the step after the foreach
            task, args = queued(raw)
            assert (
                task == STEP_TASK
                and runtime.executor.execute(StepMessage.parse(args, {})).outcome == "committed"
            )
        result = run.wait(timeout=10)
        assert result.status == "completed", result.error
        assert result.state["out"] == [square(x) for x in range(5)]
        assert sorted(int(line.split()[0]) for line in lines(tmp_path / "calls")) == [
            0,
            0,
            1,
            1,
            2,
            2,
            3,
            3,
            4,
            4,
        ]
    finally:
        runtime.close()
        client.close()


# -- 7. empty and one-item lists -----------------------------------------------------------------------


@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "sequential"])
@pytest.mark.parametrize("xs", [[], [5]], ids=["empty", "one"])
def test_empty_and_one_item_lists_complete(
    cluster: Client, tmp_path: Path, parallel: bool, xs: list[int]
) -> None:
    graph = foreach_graph(MARKED.replace("FOLDER", str(tmp_path)), parallel=parallel)
    recorded = item_writes(cluster)
    run = cluster.submit(graph, {"xs": xs})
    result = run.wait(timeout=30)
    assert item_writes(cluster) - recorded == len(xs)  # an empty list records nothing in Redis
    assert result.status == "completed", result.error
    assert result.state["out"] == [square(x) for x in xs]
    assert result.state["count"] == len(xs) and result.state["failed"] == []
    assert_agrees(result, graph.invoke_sync({"xs": xs}))
    assert [int(line.split()[0]) for line in lines(tmp_path / "calls")] == xs * 2  # cluster, then local
    assert [(s["step"], s["node"]) for s in result.steps] == [(1, "fan"), (2, "done")]
    assert item_keys(cluster, run.id) == []
