"""The store contract (tests/store_contract.py) against `RedisStore` on a real Redis."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from store_contract import RedisStoreContract, StoreFactory

from graphrunner.embedded import EmbeddedRedis
from graphrunner.store import RedisStore
from graphrunner.store.redis_store import RETENTION_SECONDS

DATABASE = 5  # a database of the session's Redis that no other test uses


class TestRedisStore(RedisStoreContract):
    """Every contract test, on an empty database of the session's Redis."""

    @pytest.fixture
    def make_store(self, redis_server: EmbeddedRedis) -> Iterator[StoreFactory]:
        url = redis_server.url.rsplit("/", 1)[0] + f"/{DATABASE}"
        with redis.Redis.from_url(url) as client:
            client.flushdb()
        made: list[RedisStore] = []

        def make(*, direct: bool = True, retention_seconds: int = RETENTION_SECONDS) -> RedisStore:
            store = RedisStore.from_url(
                url, retry_seconds=2, retention_seconds=retention_seconds, direct=direct
            )
            made.append(store)
            return store

        yield make
        for store in made:
            store.close()
