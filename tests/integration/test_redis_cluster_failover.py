"""A Redis Cluster changing under running graphs loses no committed step.

Three masters, each with a replica, hold the run state; a separate Redis is the broker; two
`graphrunner worker` processes run counting graphs whose every step appends `run n` to a file.
While they run, every master is failed over to its replica (`CLUSTER FAILOVER`, the manual,
coordinated kind), or the slot of one shard is migrated to another master key by key
(`CLUSTER SETSLOT ... IMPORTING/MIGRATING`, `MIGRATE`, `SETSLOT ... NODE`). Every run must
complete with its whole count, a transcript of one record per step, and every step's side
effect exactly once: a commit that was lost would make a step run again.
"""

from __future__ import annotations

import textwrap
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis_cluster import RedisCluster
from support import settings_of, uid, wait_for
from worker_procs import WorkerProcess, process_env

from graphrunner.client import Client, RunHandle
from graphrunner.embedded import EmbeddedRedis
from graphrunner.store.keys import KeySpace

STEPS = 40
FAST = {
    "GRAPHRUNNER_VISIBILITY_TIMEOUT": "5",
    "GRAPHRUNNER_STALL_AFTER": "5",
    "GRAPHRUNNER_SWEEP_INTERVAL": "1",
}


class Deployment:
    """A cluster with replicas, a Redis broker, two worker processes and a client."""

    def __init__(self, cluster: RedisCluster, broker: EmbeddedRedis, logs: Path) -> None:
        self.cluster = cluster
        env = {**process_env(cluster.url), **FAST, "GRAPHRUNNER_BROKER_URL": broker.url}
        self.workers = [WorkerProcess(f"failover{n}", env, logs) for n in range(2)]
        for worker in self.workers:
            worker.wait_ready(timeout=60)
        self.client = Client(settings=settings_of(redis_url=cluster.url, broker_url=broker.url))

    def close(self) -> None:
        self.client.close()
        for worker in self.workers:
            worker.stop()


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with RedisCluster(masters=3, replicas=1) as cluster, EmbeddedRedis() as broker:
        deployed = Deployment(cluster, broker, tmp_path_factory.mktemp("failover-workers"))
        try:
            yield deployed
        finally:
            deployed.close()


def counting_graph(folder: Path, effects: Path) -> Path:
    path = folder / f"count-{uid()}.yaml"
    path.write_text(
        textwrap.dedent(f"""
        id: failover/count-{uid()}
        state: {{n: {{type: integer, default: 0}}}}
        inputs: {{run: {{type: string, required: true}}}}
        config: {{start: count, max_steps: 100}}
        nodes:
          count:
            action:
              tool: python
              params: {{fn: "broker_targets:pause", args: {{path: "{effects}", run: "${{inputs.run}}", n: "${{state.n}}", seconds: 0.05}}}}
            assign: {{n: "${{result.n}}"}}
            next: [{{to: done, when: "state.n >= {STEPS}"}}, {{to: count}}]
          done: {{type: return, output: "${{state.n}}"}}
    """)
    )
    return path


def run_while(
    deployment: Deployment, tmp_path: Path, run_ids: list[str], disturb: Callable[[list[RunHandle]], None]
) -> None:
    """Run one counting graph per id, call `disturb` once they are under way, then check every run."""
    effects = tmp_path / "effects.txt"
    graph = counting_graph(tmp_path, effects)
    runs = [deployment.client.submit(graph, {"run": r}, run_id=r) for r in run_ids]
    wait_for(lambda: all(len(run.steps()) >= 3 for run in runs), 120, "every run under way")
    disturb(runs)
    for run in runs:
        result = run.wait(timeout=180)
        assert (result.status, result.output, result.step_count) == ("completed", STEPS, STEPS + 1), (
            result.error
        )
        steps = [record["step"] for record in run.steps()]
        assert steps == list(range(1, STEPS + 2)), f"{run.id}: transcript steps {steps}"
    ran = Counter(tuple(line.split()) for line in effects.read_text().splitlines())
    expected = {(r, str(n)) for r in run_ids for n in range(STEPS)}
    assert set(ran) == expected
    twice = [entry for entry, times in ran.items() if times > 1]
    transcripts = {run.id: run.steps() for run in runs if any(run.id == r for r, _ in twice)}
    assert twice == [], f"steps that ran twice: {twice}; their runs' transcripts: {transcripts}"


def test_every_master_fails_over_to_its_replica_during_runs(deployment: Deployment, tmp_path: Path) -> None:
    def fail_over_every_master(runs: list[RunHandle]) -> None:
        for replica in replicas(deployment.cluster):
            promote(replica)
            assert any(run.status() == "running" for run in runs), "the runs ended before the failovers"

    run_while(deployment, tmp_path, [f"fo-{uid()}" for _ in range(6)], fail_over_every_master)


def test_the_slot_of_a_shard_migrates_to_another_master_during_runs(
    deployment: Deployment, tmp_path: Path
) -> None:
    keys = KeySpace(16)
    shard = keys.shard("seed")
    in_shard = [r for r in (f"mig-{uid()}" for _ in range(400)) if keys.shard(r) == shard][:4]
    slot = redis.crc.key_slot(shard.index_all().encode())

    def migrate(runs: list[RunHandle]) -> None:
        migrate_slot(deployment.cluster, slot)
        assert any(run.status() == "running" for run in runs[:4]), "the runs ended before the migration"

    run_while(deployment, tmp_path, [*in_shard, f"mig-{uid()}", f"mig-{uid()}"], migrate)


# -- cluster operations -------------------------------------------------------------------------


def node(port: int) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port, decode_responses=True, socket_timeout=10)


def nodes_table(cluster: RedisCluster) -> list[dict[str, Any]]:
    """`CLUSTER NODES` as seen from any node: id, port, role flags, master id, slots."""
    with node(cluster.ports[0]) as client:
        text: str = client.execute_command("CLUSTER", "NODES")
    table = []
    for line in text.splitlines():
        fields = line.split()
        port = int(fields[1].split("@")[0].rsplit(":", 1)[1])
        table.append(
            {"id": fields[0], "port": port, "flags": fields[2], "master": fields[3], "slots": fields[8:]}
        )
    return table


def replicas(cluster: RedisCluster) -> list[int]:
    return [port for port in cluster.ports if role(port) == "slave"]


def role(port: int) -> str:
    with node(port) as client:
        return str(client.execute_command("ROLE")[0])


def promote(port: int) -> None:
    """`CLUSTER FAILOVER` on a replica; wait until it is a master and the cluster is ok again."""
    with node(port) as client:
        client.execute_command("CLUSTER", "FAILOVER")
    wait_for(lambda: role(port) == "master", 120, f"replica {port} promoted")
    wait_for(
        lambda: all(_sees_master(other, port) for other in _ports(port)),
        120,
        f"every node seeing {port} as master",
    )


def _ports(port: int) -> list[int]:
    with node(port) as client:
        text: str = client.execute_command("CLUSTER", "NODES")
    return [int(line.split()[1].split("@")[0].rsplit(":", 1)[1]) for line in text.splitlines()]


def _sees_master(port: int, master: int) -> bool:
    """Node `port` reports cluster_state ok and lists `master` as a master."""
    with node(port) as client:
        if client.cluster("info").get("cluster_state") != "ok":
            return False
        text: str = client.execute_command("CLUSTER", "NODES")
    return any(f":{master}@" in line and "master" in line.split()[2] for line in text.splitlines())


def migrate_slot(cluster: RedisCluster, slot: int) -> None:
    """Move `slot` to another master, a few keys at a time while the runs go on."""
    masters = [n for n in nodes_table(cluster) if "master" in n["flags"]]
    (source,) = [m for m in masters if _serves(m, slot)]
    target = next(m for m in masters if m is not source)
    src, dst = node(source["port"]), node(target["port"])
    try:
        dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source["id"])
        src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target["id"])
        while batch := src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 5):
            src.execute_command("MIGRATE", "127.0.0.1", target["port"], "", 0, 5000, "KEYS", *batch)
            time.sleep(0.1)
        for master in masters:
            with node(master["port"]) as client:
                client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target["id"])
    finally:
        src.close()
        dst.close()
    cluster.wait_ok()


def _serves(master: dict[str, Any], slot: int) -> bool:
    for span in master["slots"]:
        low, _, high = span.partition("-")
        if not span.startswith("[") and int(low) <= slot <= int(high or low):
            return True
    return False
