"""GRAPHRUNNER_REDIS_MIN_REPLICAS: a commit waits (Redis WAIT) until replicas have it, so one the
store acknowledged survives the master's death and a failover to the replica; a commit that too
few replicas acknowledge in time raises `StoreUnavailable` (its message comes back, fenced)."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from support import settings_of, wait_for
from worker_procs import WorkerProcess, process_env

from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis, free_port, redis_binary
from graphrunner.engine import RunSnapshot, RunStatus
from graphrunner.errors import StoreUnavailable
from graphrunner.store import Fence, RedisStore
from graphrunner.store.replicas import Replicas

pytestmark = pytest.mark.integration


@pytest.fixture
def replica(private_redis: EmbeddedRedis, tmp_path: Path) -> Iterator[Replica]:
    """A redis-server replicating `private_redis`, once its link to the master is up."""
    with redis.Redis(port=private_redis.port) as master:
        master.config_set("repl-diskless-sync-delay", 0)  # the first sync now, not in 5 s
    port = free_port()
    argv = [redis_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    argv += ["--dir", str(tmp_path), "--replicaof", "127.0.0.1", str(private_redis.port)]
    process = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    client = redis.Redis(port=port, decode_responses=True, socket_timeout=5)
    try:
        wait_for(lambda: _linked(client), 30, "the replica's link to its master")
        yield Replica(port, client, process)
    finally:
        client.close()
        process.send_signal(signal.SIGCONT)
        process.terminate()
        process.wait(timeout=10)


@dataclass
class Replica:
    port: int
    client: redis.Redis
    process: subprocess.Popen[bytes]


def _linked(client: redis.Redis) -> bool:
    try:
        return client.info("replication").get("master_link_status") == "up"
    except redis.ConnectionError:
        return False


def created(store: RedisStore, run_id: str) -> RunSnapshot:
    snap = RunSnapshot(run_id=run_id, graph_id="t/replicated", node="a", state={"n": 0})
    assert store.create_run(snap, "fp").created
    return snap


def test_a_commit_acknowledged_by_a_replica_survives_the_masters_death(
    private_redis: EmbeddedRedis, replica: Replica
) -> None:
    store = RedisStore.from_url(private_redis.url, retry_seconds=2, replicas=Replicas(1, 60_000))
    try:
        snap = created(store, "r-kept")
        moved = snap.model_copy(
            update={"step": 1, "node": "b", "state": {"n": 1}, "status": RunStatus.COMPLETED}
        )
        replica.process.send_signal(signal.SIGSTOP)  # the replica falls behind
        with ThreadPoolExecutor(1) as pool:
            commit = pool.submit(store.commit, Fence.of(snap), moved)
            wait_for(lambda: _status(private_redis, "r-kept") == "completed", 30, "the commit on the master")
            assert not commit.done()  # written on the master, not yet acknowledged: WAIT holds it
            replica.process.send_signal(signal.SIGCONT)
            assert commit.result(timeout=60).committed  # returned: the replica has it
    finally:
        store.close()
    assert private_redis.process is not None
    private_redis.process.send_signal(signal.SIGKILL)  # no chance to send anything more
    private_redis.process.wait(timeout=10)
    replica.client.replicaof("NO", "ONE")  # the failover: the replica is the master now
    promoted = RedisStore.from_url(f"redis://127.0.0.1:{replica.port}/0", retry_seconds=2)
    try:
        kept = promoted.load_run("r-kept")
    finally:
        promoted.close()
    assert kept is not None
    assert (kept.step, kept.status, kept.state) == (1, RunStatus.COMPLETED, {"n": 1})


def _status(server: EmbeddedRedis, run_id: str) -> str | None:
    """The run's status on `server`, read on a connection of its own (the store's may be waiting)."""
    store = RedisStore.from_url(server.url, retry_seconds=2)
    try:
        return store.status_of(run_id)
    finally:
        store.close()


def test_too_few_replicas_in_time_raise_after_the_commit_is_written(
    private_redis: EmbeddedRedis, replica: Replica
) -> None:
    store = RedisStore.from_url(private_redis.url, retry_seconds=2, replicas=Replicas(2, 100))
    try:
        snap = created(store, "r-short")
        moved = snap.model_copy(update={"step": 1, "node": "b"})
        with pytest.raises(
            StoreUnavailable, match=r"acknowledged by [01] of GRAPHRUNNER_REDIS_MIN_REPLICAS=2 "
        ):
            store.commit(Fence.of(snap), moved)
        again = store.commit(Fence.of(snap), moved)  # the message comes back: fenced off
        assert not again.committed and again.current_step == 1
    finally:
        store.close()


def test_a_worker_commits_every_step_through_the_replica(
    private_redis: EmbeddedRedis, replica: Replica, tmp_path: Path
) -> None:
    graph = tmp_path / "wait.yaml"
    graph.write_text(
        "id: t/wait\nconfig: {start: a}\nnodes:\n"
        "  a: {action: {tool: echo, params: {n: 1}}, next: b}\n"
        "  b: {action: {tool: echo, params: {n: 2}}, next: done}\n"
        "  done: {type: return}\n"
    )
    env = {**process_env(private_redis.url), "GRAPHRUNNER_REDIS_MIN_REPLICAS": "1"}
    worker = WorkerProcess("wait", env, tmp_path)
    try:
        worker.wait_ready(timeout=60)
        with Client(settings=settings_of(redis_url=private_redis.url)) as client:
            result = client.submit(graph).wait(timeout=60)
        assert (result.status, result.path) == ("completed", ["a", "b", "done"])
    finally:
        worker.stop()
    assert "acknowledged by" not in worker.log.read_text()  # no commit fell short of its replica
    on_replica = RedisStore.from_url(f"redis://127.0.0.1:{replica.port}/0", retry_seconds=2)
    try:
        wait_for(lambda: on_replica.status_of(result.run_id) == "completed", 30, "the replica's copy")
    finally:
        on_replica.close()
