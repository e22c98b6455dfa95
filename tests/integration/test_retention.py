"""Retention: finished runs and their transcripts expire after GRAPHRUNNER_RETENTION; pruning
takes them out of every index, and touches nothing else."""

from __future__ import annotations

import json
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from support import settings_of
from worker_procs import WorkerProcess

from graphrunner import parse_graph
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis
from graphrunner.engine import RunSnapshot, RunStatus
from graphrunner.errors import RunNotFound
from graphrunner.store import Fence, RedisStore
from graphrunner.store.keys import KeySpace, cache
from graphrunner.store.query import STATUSES

KEYS = KeySpace()  # the layout on one Redis
SHARD = KEYS.shards[0]

SHORT = 2  # seconds


@pytest.fixture(scope="module")
def private_redis() -> Iterator[EmbeddedRedis]:
    """A Redis of this module's own: pruning and key counts see only what these tests wrote."""
    with EmbeddedRedis() as server:
        yield server


@pytest.fixture
def store(private_redis: EmbeddedRedis) -> Iterator[RedisStore]:
    """A store on an empty database whose finished runs expire after one second."""
    store = RedisStore.from_url(private_redis.url, retention_seconds=SHORT)
    store.redis.flushdb()
    yield store
    store.redis.close()


def create(store: RedisStore, run_id: str, graph_id: str = "t/keep") -> RunSnapshot:
    snap = RunSnapshot(run_id=run_id, graph_id=graph_id, node="work", state={"n": 1})
    assert store.create_run(snap, "fp").created
    return snap


def move(store: RedisStore, snap: RunSnapshot, status: RunStatus, node: str | None = "work") -> RunSnapshot:
    """Commit one step of `snap` that leaves it in `status` (with a transcript record and path entry)."""
    after = snap.model_copy(update={"step": snap.step + 1, "status": status, "node": node})
    record = json.dumps({"step": after.step, "node": "work", "status": status.value})
    assert store.commit(Fence.of(snap), after, [record], ["work"]).committed
    return after


def run_keys(run_id: str) -> list[str]:
    return [KEYS.run(run_id), KEYS.steps(run_id), KEYS.path(run_id)]


def indexes_holding(store: RedisStore, run_id: str, graph_id: str) -> set[str]:
    """Every index (all, graph, status, status+graph) that lists `run_id`."""
    candidates = [SHARD.index_all(), SHARD.index_graph(graph_id)]
    candidates += [SHARD.index_status(s) for s in STATUSES]
    candidates += [SHARD.index_graph_status(graph_id, s) for s in STATUSES]
    return {k for k in candidates if store.redis.zscore(k, run_id) is not None}


def expiry_ids(store: RedisStore) -> set[str]:
    return {m.split('"')[1] for m in store.redis.zrange(SHARD.index_expiry(), 0, -1)}


def wait_gone(client: redis.Redis, names: list[str], timeout: float = 10.0) -> None:
    """Poll until none of `names` exists (Redis expires keys on its own clock)."""
    deadline = time.monotonic() + timeout
    while client.exists(*names):
        assert time.monotonic() < deadline, f"still there after {timeout}s: {names}"
        time.sleep(0.1)


def test_retention_removes_expired_runs_and_nothing_else(store: RedisStore) -> None:
    done = move(store, create(store, "done", "t/a"), RunStatus.COMPLETED, None)
    failed = move(store, create(store, "failed", "t/b"), RunStatus.FAILED)
    running = move(store, create(store, "running", "t/a"), RunStatus.RUNNING)
    paused = move(store, create(store, "paused", "t/b"), RunStatus.PAUSED)
    fresh = create(store, "fresh", "t/a")
    long_lived = RedisStore.from_url(store.url or "", retention_seconds=3600)
    kept = move(long_lived, create(long_lived, "kept", "t/a"), RunStatus.COMPLETED, None)
    store.redis.set("unrelated", "x")
    store.redis.set(cache("digest"), "1", ex=3600)
    store.save_graph("hash", {"text": "id: t/a"})

    for run_id in ("done", "failed"):
        assert all(0 < store.redis.pttl(k) <= SHORT * 1000 for k in run_keys(run_id))
    for run_id in ("running", "paused", "fresh", "kept"):
        assert store.redis.ttl(KEYS.run(run_id)) in (-1, *range(3000, 3601))
    assert store.redis.ttl(KEYS.run("running")) == -1 and store.redis.ttl(KEYS.steps("paused")) == -1
    survivors = {
        k for k in store.redis.keys("*") if not k.startswith(("gr:run:{done}", "gr:run:{failed}", "gr:idx:"))
    }

    wait_gone(store.redis, run_keys("done") + run_keys("failed"))
    listed = {r.run_id for r in store.list_runs(limit=100)}
    assert listed == {"running", "paused", "fresh", "kept"}  # expired ids are skipped before pruning
    assert indexes_holding(store, "done", "t/a")  # ... though still indexed

    assert store.prune_expired() == 2
    assert indexes_holding(store, "done", "t/a") == set()
    assert indexes_holding(store, "failed", "t/b") == set()
    assert expiry_ids(store) == {"kept"}
    assert indexes_holding(store, "running", "t/a") == {
        SHARD.index_all(),
        SHARD.index_graph("t/a"),
        SHARD.index_status("running"),
        SHARD.index_graph_status("t/a", "running"),
    }
    assert indexes_holding(store, "paused", "t/b") == {
        SHARD.index_all(),
        SHARD.index_graph("t/b"),
        SHARD.index_status("paused"),
        SHARD.index_graph_status("t/b", "paused"),
    }
    assert (
        len(indexes_holding(store, "kept", "t/a")) == 4 and len(indexes_holding(store, "fresh", "t/a")) == 4
    )
    remaining = {k for k in store.redis.keys("*") if not k.startswith("gr:idx:")}
    assert remaining == survivors
    for snap in (running, paused, fresh, kept):
        assert store.load_run(snap.run_id) is not None
    assert store.steps("running") and store.steps("paused")
    assert done.run_id not in {r.run_id for r in store.list_runs(graph_id="t/a", status="completed")}
    assert failed.run_id not in {r.run_id for r in store.list_runs(status="failed")}
    assert store.prune_expired() == 0
    long_lived.redis.close()


def test_resuming_a_finished_run_keeps_it_again(store: RedisStore) -> None:
    failed = move(store, create(store, "again", "t/r"), RunStatus.FAILED)
    assert store.redis.pttl(KEYS.run("again")) > 0 and expiry_ids(store) == {"again"}

    resumed = move(store, failed, RunStatus.RUNNING)  # what `resume` commits: failed -> running
    assert [store.redis.ttl(k) for k in run_keys("again")] == [-1, -1, -1]
    assert expiry_ids(store) == set()
    assert store.prune_expired(now_ms=int(time.time() * 1000) + 10**9) == 0  # far past any expiry
    assert store.load_run("again") is not None
    assert indexes_holding(store, "again", "t/r") == {
        SHARD.index_all(),
        SHARD.index_graph("t/r"),
        SHARD.index_status("running"),
        SHARD.index_graph_status("t/r", "running"),
    }

    move(store, resumed, RunStatus.CANCELLED)  # finished again: it expires again
    assert 0 < store.redis.pttl(KEYS.steps("again")) <= SHORT * 1000 and expiry_ids(store) == {"again"}


def test_pruning_leaves_runs_whose_keys_have_not_expired(store: RedisStore) -> None:
    patient = RedisStore.from_url(store.url or "", retention_seconds=3600)
    move(patient, create(patient, "later", "t/l"), RunStatus.COMPLETED, None)
    # as if the clocks disagreed: the expiry time has passed, the keys are still there
    assert patient.prune_expired(now_ms=int(time.time() * 1000) + 3_700_000) == 0
    assert len(indexes_holding(store, "later", "t/l")) == 4
    assert [r.run_id for r in store.list_runs(graph_id="t/l")] == ["later"]
    assert expiry_ids(store) == {"later"}  # looked at again later
    patient.redis.close()


def test_a_pruned_run_id_can_be_used_again(store: RedisStore) -> None:
    move(store, create(store, "reused", "t/u"), RunStatus.COMPLETED, None)
    wait_gone(store.redis, run_keys("reused"))
    create(store, "reused", "t/u")  # a new run under the same id, before the sweep
    assert store.prune_expired() == 0  # its record is there: it is alive, so it stays
    assert [r.status for r in store.list_runs(graph_id="t/u")] == ["running"]
    assert store.list_runs(graph_id="t/u", status="completed") == []  # the old run's entry is skipped
    assert {SHARD.index_all(), SHARD.index_status("running")} <= indexes_holding(store, "reused", "t/u")


def test_a_run_finished_on_the_cluster_expires_with_its_transcript(
    private_redis: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    graph = parse_graph(
        textwrap.dedent("""
        id: t/expiring
        config: {start: a}
        nodes:
          a: {action: {tool: echo, params: {x: 1}}, next: b}
          b: {type: return}
    """)
    )
    settings = settings_of(redis_url=private_redis.url, retention=SHORT)
    # a worker process: a second in-thread worker would stop the session's when it stops
    env = {**worker_env, "GRAPHRUNNER_REDIS_URL": private_redis.url, "GRAPHRUNNER_RETENTION": str(SHORT)}
    worker = WorkerProcess(f"retention-{uuid.uuid4().hex[:8]}", env, tmp_path)
    try:
        with Client(settings=settings) as client:
            worker.wait_ready()
            assert client.store.index.retention_seconds == SHORT
            run = client.submit(graph)
            assert run.wait(timeout=30).status == "completed"
            assert all(0 < client.store.redis.pttl(k) <= SHORT * 1000 for k in run_keys(run.id))
            wait_gone(client.store.redis, run_keys(run.id))
            with pytest.raises(RunNotFound):
                client.run(run.id)
            assert client.store.prune_expired() >= 1
            assert run.id not in {r.run_id for r in client.list_runs(graph_id="t/expiring")}
            assert indexes_holding(client.store, run.id, "t/expiring") == set()
    finally:
        worker.stop()
