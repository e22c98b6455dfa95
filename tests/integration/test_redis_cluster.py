"""Redis Cluster: the fixture forms a real three-master cluster, and graphrunner, which does not
yet keep run state on a cluster, refuses a `redis+cluster://` URL with a clear error at once."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis_cluster import RedisCluster

from graphrunner.client import Client
from graphrunner.errors import ConfigurationError
from graphrunner.settings import Settings


@pytest.fixture(scope="module")
def redis_cluster() -> Iterator[RedisCluster]:
    with RedisCluster(masters=3) as cluster:
        yield cluster


def test_the_fixture_forms_a_cluster_covering_every_slot(redis_cluster: RedisCluster) -> None:
    client = redis.RedisCluster(host="127.0.0.1", port=redis_cluster.ports[0], decode_responses=True)
    try:
        info = client.cluster_info()
        assert info["cluster_state"] == "ok"
        assert int(info["cluster_slots_assigned"]) == 16384
        assert len(client.get_primaries()) == 3
        client.set("{run-1}:state", "a")
        client.set("{run-2}:state", "b")  # keys on other slots are moved to their node
        assert (client.get("{run-1}:state"), client.get("{run-2}:state")) == ("a", "b")
    finally:
        client.close()


def test_a_cluster_url_is_refused_by_name(redis_cluster: RedisCluster) -> None:
    with pytest.raises(
        ConfigurationError, match=r"GRAPHRUNNER_REDIS_URL names a Redis Cluster \(redis\+cluster://\)"
    ):
        Client(settings=Settings(redis_url=redis_cluster.url, broker_url="amqp://guest@127.0.0.1:1//"))


def test_a_worker_refuses_a_cluster_url_before_it_starts(
    redis_cluster: RedisCluster, worker_env: dict[str, Any]
) -> None:
    result = start_worker(worker_env, redis_cluster.url)
    assert result.returncode == 2, result.stderr
    assert "a Redis Cluster as the state store is not supported yet" in result.stderr


@pytest.mark.parametrize("url", ["http://127.0.0.1:6379/0", "localhost:6379"])
def test_a_url_of_another_kind_is_refused_by_name(url: str, worker_env: dict[str, Any]) -> None:
    result = start_worker(worker_env, url)
    assert result.returncode == 2, result.stderr
    assert "GRAPHRUNNER_REDIS_URL must start with redis://, rediss:// or unix://" in result.stderr


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
