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

        def make(
            *, direct: bool = True, retention_seconds: int = RETENTION_SECONDS, history_bytes: int = 8 << 20
        ) -> RedisStore:
            store = RedisStore.from_url(
                url,
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


def test_a_join_reads_item_records_a_page_at_a_time_as_it_folds_them(private_redis: EmbeddedRedis) -> None:
    store = RedisStore.from_url(private_redis.url)
    try:
        store.save_items("run-1", "t", [(i, {"ok": True, "result": i}) for i in range(2500)])

        def pages_read() -> int:
            stats = store.redis.info("commandstats")
            return int(stats.get("cmdstat_hmget", {}).get("calls", 0))

        before = pages_read()
        records = store.item_records("run-1", "t", 2500)
        assert pages_read() == before  # nothing is read before the first record is asked for
        first_page = [next(records) for _ in range(1000)]
        assert pages_read() == before + 1 and first_page[-1] == {"ok": True, "result": 999}
        assert next(records) == {"ok": True, "result": 1000} and pages_read() == before + 2
        assert len(list(records)) == 1499 and pages_read() == before + 3
    finally:
        store.close()
