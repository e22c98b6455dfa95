"""The store contract (tests/store_contract.py) against `MemoryStore`."""

from __future__ import annotations

import pytest
from store_contract import StoreContract, StoreFactory

from graphrunner.store import Store
from graphrunner.store.memory_store import MemoryStore


class TestMemoryStore(StoreContract):
    """Every contract test, on a fresh in-memory store."""

    @pytest.fixture
    def make_store(self) -> StoreFactory:
        def make(
            *, direct: bool = True, retention_seconds: int = 7 * 24 * 3600, history_bytes: int = 8 << 20
        ) -> MemoryStore:
            return MemoryStore(
                direct=direct, retention_seconds=retention_seconds, history_bytes=history_bytes
            )

        return make

    def queued(self, store: Store, queue: str) -> list[str]:
        assert isinstance(store, MemoryStore)
        return list(store.queues.get(queue, []))

    def freeze_clock(self, monkeypatch: pytest.MonkeyPatch, ms: int) -> None:
        monkeypatch.setattr("graphrunner.store.memory_store._now_ms", lambda: ms)
