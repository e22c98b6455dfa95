"""Redis Cluster as the state store: the fixture forms a real three-master cluster, the runs of a
store spread over every master, and every URL, broker or backend that cannot work with a
cluster is refused with an error naming the setting, by the client and by `graphrunner worker`.

The graphs that run on a cluster are in test_brokers.py (topologies `cluster+redis` and
`cluster+amqp`); the store contract on a cluster is test_redis_cluster_store.py; failover and
slot migration during runs are test_redis_cluster_failover.py.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import redis
from redis_cluster import RedisCluster, cluster_port
from store_contract import snapshot
from support import settings_of, wait_for

from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis
from graphrunner.errors import ConfigurationError, StoreUnavailable
from graphrunner.settings import Settings
from graphrunner.store import RedisStore
from graphrunner.store.keys import KeySpace

AMQP = "amqp://guest:guest@127.0.0.1:1//"  # never reached: the settings are refused first


@pytest.fixture
def plain(redis_cluster: RedisCluster) -> Iterator[redis.RedisCluster]:
    """A redis-py cluster client on the test cluster, emptied first."""
    client = redis.RedisCluster(host="127.0.0.1", port=redis_cluster.ports[0], decode_responses=True)
    client.flushall()
    yield client
    client.close()


def cluster_settings(cluster: RedisCluster, broker: EmbeddedRedis, **changes: Any) -> Settings:
    return replace(settings_of(redis_url=cluster.url, broker_url=broker.url), **changes)


def test_the_fixture_forms_a_cluster_covering_every_slot(plain: redis.RedisCluster) -> None:
    info = plain.cluster_info()
    assert info["cluster_state"] == "ok"
    assert int(info["cluster_slots_assigned"]) == 16384
    assert len(plain.get_primaries()) == 3
    plain.set("{run-1}:state", "a")
    plain.set("{run-2}:state", "b")  # keys on other slots are moved to their node
    assert (plain.get("{run-1}:state"), plain.get("{run-2}:state")) == ("a", "b")


def test_the_runs_of_a_store_spread_over_every_master(
    redis_cluster: RedisCluster, plain: redis.RedisCluster
) -> None:
    store = RedisStore.from_url(redis_cluster.url, direct=False)
    try:
        for n in range(48):
            assert store.create_run(snapshot(f"spread-{n}"), "fp").created
        per_master = [plain.dbsize(target_nodes=node) for node in plain.get_primaries()]
        assert all(count > 0 for count in per_master), per_master
        listed = [r.run_id for r in store.list_runs(limit=100)]
        assert sorted(listed) == sorted(f"spread-{n}" for n in range(48))
    finally:
        store.close()


def test_shards_sit_on_evenly_spread_slots() -> None:
    slots = [redis.crc.key_slot(s.index_all().encode()) for s in KeySpace(16).shards]
    assert slots == sorted(slots) and len(set(slots)) == 16
    assert [slot * 16 // 16384 for slot in slots] == list(range(16))  # one in each sixteenth


def test_a_cluster_url_naming_a_single_redis_is_refused(private_redis: EmbeddedRedis) -> None:
    url = private_redis.url.replace("redis://", "redis+cluster://")
    with pytest.raises(ConfigurationError, match=r"is not a cluster node \(cluster mode is not enabled"):
        Client(settings=settings_of(redis_url=url, broker_url=private_redis.url))


def test_a_cluster_that_cannot_be_reached_is_tried_again_then_named() -> None:
    url = f"redis+cluster://127.0.0.1:{cluster_port()}/0"  # nothing listens there
    with pytest.raises(
        StoreUnavailable, match=r"cannot reach the Redis Cluster at .* \(GRAPHRUNNER_REDIS_URL\)"
    ):
        RedisStore.from_url(url, direct=False, retry_seconds=1)


def test_a_cluster_needs_a_broker_of_its_own(redis_cluster: RedisCluster) -> None:
    with pytest.raises(ConfigurationError, match=r"GRAPHRUNNER_BROKER_URL is not set: .* Redis Cluster"):
        Client(settings=settings_of(redis_url=redis_cluster.url))


def test_a_cluster_with_rabbitmq_needs_a_redis_for_chord_counters(redis_cluster: RedisCluster) -> None:
    with pytest.raises(ConfigurationError, match=r"GRAPHRUNNER_RESULT_BACKEND_URL is not set"):
        Client(settings=settings_of(redis_url=redis_cluster.url, broker_url=AMQP))
    clustered_backend = Settings(
        redis_url=redis_cluster.url, broker_url=AMQP, result_backend_url=redis_cluster.url
    )
    with pytest.raises(ConfigurationError, match=r"GRAPHRUNNER_RESULT_BACKEND_URL must name a single Redis"):
        Client(settings=clustered_backend)


def test_a_database_other_than_0_is_refused(
    redis_cluster: RedisCluster, private_redis: EmbeddedRedis
) -> None:
    settings = cluster_settings(redis_cluster, private_redis, redis_url=redis_cluster.url[:-1] + "3")
    with pytest.raises(
        ConfigurationError, match=r"GRAPHRUNNER_REDIS_URL: a Redis Cluster has only database 0"
    ):
        Client(settings=settings)


def test_the_shard_count_cannot_change_under_kept_runs(
    redis_cluster: RedisCluster, private_redis: EmbeddedRedis, plain: redis.RedisCluster
) -> None:
    Client(settings=cluster_settings(redis_cluster, private_redis)).close()  # records 16 shards
    with pytest.raises(ConfigurationError, match=r"GRAPHRUNNER_CLUSTER_SHARDS is 8, but .* written with 16"):
        Client(settings=cluster_settings(redis_cluster, private_redis, cluster_shards=8))


def test_a_cluster_with_an_uncovered_slot_is_refused(
    redis_cluster: RedisCluster, private_redis: EmbeddedRedis, plain: redis.RedisCluster
) -> None:
    owner = plain.get_node_from_key("gr:{0.0}")  # any slot will do: take the one of key `0.0`
    slot = redis.crc.key_slot(b"0.0")
    nodes = [redis.Redis(host="127.0.0.1", port=port, decode_responses=True) for port in redis_cluster.ports]
    try:
        forget_slot(nodes, slot, owner.port)
        with pytest.raises(ConfigurationError, match=r"does not cover every slot: 16383 of 16384 slots"):
            Client(settings=cluster_settings(redis_cluster, private_redis))
    finally:
        (back,) = [n for n in nodes if n.connection_pool.connection_kwargs["port"] == owner.port]
        back.execute_command("CLUSTER", "ADDSLOTS", slot)
        for node in nodes:
            node.close()
        redis_cluster.wait_ok()


def forget_slot(nodes: list[redis.Redis], slot: int, owner: int) -> None:
    """Make every node forget who serves `slot`: its owner first (once it no longer claims the slot,
    no gossip can teach the others again), then the others, until every node says so."""
    nodes = sorted(nodes, key=lambda n: n.connection_pool.connection_kwargs["port"] != owner)

    def forgotten() -> bool:
        for node in nodes:
            if int(node.cluster("INFO")["cluster_slots_assigned"]) == 16384:
                node.execute_command("CLUSTER", "DELSLOTS", slot)
        return all(int(node.cluster("INFO")["cluster_slots_assigned"]) == 16383 for node in nodes)

    wait_for(forgotten, 30, f"every node to forget slot {slot}")


def test_a_worker_refuses_a_cluster_without_a_broker(
    redis_cluster: RedisCluster, worker_env: dict[str, Any]
) -> None:
    env = {k: v for k, v in worker_env.items() if k != "GRAPHRUNNER_BROKER_URL"}
    result = start_worker(env, redis_cluster.url)
    assert result.returncode == 2, result.stderr
    assert "GRAPHRUNNER_BROKER_URL is not set" in result.stderr


@pytest.mark.parametrize("url", ["http://127.0.0.1:6379/0", "localhost:6379"])
def test_a_url_of_another_kind_is_refused_by_name(url: str, worker_env: dict[str, Any]) -> None:
    result = start_worker(worker_env, url)
    assert result.returncode == 2, result.stderr
    assert "GRAPHRUNNER_REDIS_URL must start with redis://, rediss://, unix:// or" in result.stderr


def start_worker(env: dict[str, Any], redis_url: str) -> subprocess.CompletedProcess[str]:
    """`graphrunner worker` with GRAPHRUNNER_REDIS_URL=`redis_url` (it is expected to refuse)."""
    return subprocess.run(
        [sys.executable, "-m", "graphrunner", "worker"],
        env={**env, "GRAPHRUNNER_REDIS_URL": redis_url},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
