"""The store contract (tests/store_contract.py) against `RedisStore` on a three-master Redis Cluster.

On a cluster the store never pushes onto queues itself (the broker is another server), so every
contract test runs in `outbox` mode; the layout spreads the runs over 16 shards on all masters.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from redis_cluster import RedisCluster
from store_contract import RedisStoreContract, StoreFactory

from graphrunner.store import RedisStore, Store
from graphrunner.store.redis_store import RETENTION_SECONDS


class TestRedisClusterStore(RedisStoreContract):
    """Every contract test, on an emptied Redis Cluster."""

    @pytest.fixture
    def store(self, make_store: StoreFactory) -> Store:
        return make_store()

    @pytest.fixture
    def make_store(self, redis_cluster: RedisCluster) -> Iterator[StoreFactory]:
        plain = redis_cluster.url.replace("redis+cluster://", "redis://")
        with redis.RedisCluster.from_url(plain) as client:
            client.flushall()
        made: list[RedisStore] = []

        def make(
            *, direct: bool = False, retention_seconds: int = RETENTION_SECONDS, history_bytes: int = 8 << 20
        ) -> RedisStore:
            store = RedisStore.from_url(
                redis_cluster.url,
                retry_seconds=2,
                retention_seconds=retention_seconds,
                direct=direct,
                history_bytes=history_bytes,
            )
            made.append(store)
            return store

        yield make
        for store in made:
            store.close()
