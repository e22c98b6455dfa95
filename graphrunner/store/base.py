"""The store interface: where runs, their state, transcripts and graph definitions live."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from graphrunner.engine import RunSnapshot

if TYPE_CHECKING:
    from graphrunner.store.query import RunPage, RunQuery


@dataclass(frozen=True)
class Created:
    """The result of `create_run`: created, or the fingerprint of the run already there."""

    created: bool
    existing_fingerprint: str | None = None


@dataclass(frozen=True)
class Fence:
    """Where a commit expects the run to be: at `step`, suspended `phase` times, in `status`."""

    step: int
    phase: int = 0
    status: str = "running"

    @classmethod
    def of(cls, snap: RunSnapshot) -> Fence:
        """The fence for a commit that follows `snap`."""
        return cls(snap.step, snap.phase, snap.status.value)


@dataclass(frozen=True)
class Committed:
    """The result of `commit`: committed, or fenced off by the run's current step/status."""

    committed: bool
    current_step: int | None = None
    current_status: str | None = None


@dataclass(frozen=True)
class StepEntry:
    """One transcript record and its stream position."""

    id: str
    record: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunSummary:
    """A run as listed: id, graph, status, step and timestamps (ms)."""

    run_id: str
    graph_id: str
    status: str
    step: int
    created_at: int
    updated_at: int


class Store(Protocol):
    """Storage for runs; the Redis implementation is `RedisStore`."""

    def save_graph(self, content_hash: str, definition: dict[str, Any]) -> None: ...

    def load_graph(self, content_hash: str) -> dict[str, Any] | None: ...

    def create_run(self, snap: RunSnapshot, fingerprint: str) -> Created: ...

    def load_run(self, run_id: str, with_path: bool = False) -> RunSnapshot | None: ...

    def commit(
        self,
        fence: Fence,
        snap: RunSnapshot,
        records: Sequence[dict[str, Any]] = (),
        walked: Sequence[str] = (),
    ) -> Committed: ...

    def mark_dispatched(self, run_id: str, phase: int) -> None: ...

    def save_item(self, run_id: str, tag: str, index: int, record: dict[str, Any]) -> bool: ...

    def count_items(self, run_id: str, tag: str) -> int: ...

    def load_items(self, run_id: str, tag: str, total: int) -> list[dict[str, Any] | None]: ...

    def drop_items(self, run_id: str, tag: str) -> None: ...

    def cache_get(self, digest: str) -> tuple[bool, Any]: ...

    def cache_set(self, digest: str, value: Any, ttl: int) -> None: ...

    def steps(self, run_id: str, after: str = "-", count: int | None = None) -> list[StepEntry]: ...

    def wait_steps(self, run_id: str, after: str, block_ms: int) -> list[StepEntry]: ...

    def list_runs(
        self, graph_id: str | None = None, status: str | None = None, limit: int = 50, offset: int = 0
    ) -> Sequence[RunSummary]: ...

    def page_runs(self, query: RunQuery) -> RunPage: ...

    def prune_expired(self, now_ms: int | None = None, batch: int = 1000) -> int: ...
