"""The store interface: every operation the cluster performs on runs, in one place.

A store keeps runs (record, state, transcript, path), graph definitions, foreach item
results, the result cache, concurrency keys, the indexes runs are listed by, and what the
cluster needs to keep runs moving: the messages a commit sends (pushed onto the broker's
queue in the same atomic write when the broker is the store's own Redis, kept in the run's
outbox otherwise), durable timers, progress deadlines for the sweeper, and dead letters.

`RedisStore` is the production implementation, `MemoryStore` the in-memory one the unit
tests drive the executor, operations and sweeper with; one conformance suite
(`tests/store_contract.py`) runs against both.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from graphrunner.engine import RunSnapshot
from graphrunner.errors import RunNotFound
from graphrunner.store.query import RunPage, RunQuery, RunSummary

VERSIONS_KEPT = 100  # a graph id's index of stored versions keeps the newest this many


def now_ms() -> int:
    """Milliseconds since the epoch: the stores' timestamps and deadlines."""
    return int(time.time() * 1000)


@dataclass(frozen=True)
class Created:
    """The result of `create_run`: created, or the fingerprint of the run already there."""

    created: bool
    existing_fingerprint: str | None = None


@dataclass(frozen=True)
class GraphVersion:
    """A stored version of a graph: its content hash, when it was first stored (ms), whether its
    definition is still in the store (graphrunner never deletes one; an operator may)."""

    content_hash: str
    stored_at: int
    stored: bool = True


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
class Ack:
    """The broker message a commit acknowledges in its own write, when the broker is the store's
    Redis: its delivery `tag` leaves kombu's records of unacknowledged messages (the hash
    `unacked` and the sorted set `index`), so it can never be restored and delivered again."""

    tag: str
    unacked: str
    index: str


def ack_parts(ack: Ack | None) -> tuple[list[str], str]:
    """What a script call takes to acknowledge `ack` (sends.lua's `acknowledge`): kombu's two keys
    and the tag argument; no keys and '' for none."""
    return ([ack.index, ack.unacked], ack.tag) if ack is not None else ([], "")


@dataclass(frozen=True)
class Committed:
    """The result of `commit`: committed, or fenced off by the run's current step/status;
    `acked` when the commit also acknowledged the message it was given (`Ack`)."""

    committed: bool
    current_step: int | None = None
    current_status: str | None = None
    acked: bool = False


@dataclass(frozen=True)
class StepEntry:
    """One transcript record and its stream position; `status` is the run's status after the
    commit that wrote it when that commit left the run not running (None otherwise, and for
    records a commit did not write), so a follower sees a run settle without reading it."""

    id: str
    record: dict[str, Any] = field(default_factory=dict)
    status: str | None = None


@dataclass(frozen=True)
class Gather:
    """A wake-up of step `step` of run `run_id` (a parent waiting on child runs), gathered: the
    child run `member` ("" for none) joins the step's set of ended children, and the message is
    sent only when the step's wake-up flag was not set (it is set from then on, while the wake-up
    is pending and while the step handles it: `release_ended` clears it, or it expires after
    `hold` seconds), so children that end close together wake the step once. Where a child's
    write cannot reach its parent's keys (a Redis Cluster: another slot) the message is sent as
    it is."""

    run_id: str
    step: int
    member: str = ""
    hold: int = (
        0  # seconds the flag lives at most (a wake-up lost on the way is sent again then); 0: the retention
    )


@dataclass(frozen=True)
class Send:
    """A message a write sends: `body` for `queue`, now or (a durable timer) at `due` (epoch s).

    `tag` identifies the message on the broker. `tracked`: the message carries the run it is
    committed with forward (its next step); the run records it as sent, so the sweeper can
    tell a message in flight from a lost one. `gather`: a parent's wake-up, sent only when none
    is pending (`Gather`).
    """

    queue: str
    body: str
    tag: str
    due: float | None = None
    tracked: bool = False
    gather: Gather | None = None

    def entry(self) -> dict[str, Any]:
        """The message as an outbox keeps it (JSON-ready; what is gathered is done at the write)."""
        return {
            "queue": self.queue,
            "body": self.body,
            "tag": self.tag,
            "due": self.due,
            "tracked": self.tracked,
        }


@dataclass(frozen=True)
class Aside:
    """A history side record a commit keeps with its transcript record number `index` (0-based,
    in the commit's records) of step `step`: the JSON of the state values that record does not
    carry (too large for it, or a resume's patch). Kept while the run's history is within its
    budget (`GRAPHRUNNER_HISTORY_MAX_BYTES`)."""

    index: int
    step: int
    body: str


@dataclass(frozen=True)
class Kept:
    """What a run keeps of its history beside its transcript: where it starts (`start`: node,
    step, status and graph hash; None when the run keeps no history), its initial `state`, the
    side records by transcript entry id (`asides`), and the step whose side record the budget
    had no room for (`full_at`, None while there is room)."""

    start: dict[str, Any] | None
    state: dict[str, Any] | None
    asides: dict[str, dict[str, Any]]
    full_at: int | None


def history_start(snap: RunSnapshot, state_json: str, budget: int) -> str:
    """What a store keeps where a new run's history starts: '' for none (`budget` 0), 'full' when
    its initial state alone is over `budget`, else the start's JSON (node, step, status, hash)."""
    if budget <= 0:
        return ""
    if len(state_json) > budget:
        return "full"
    at = {"node": snap.node, "step": snap.step, "status": snap.status.value, "graph_hash": snap.graph_hash}
    return json.dumps(at)


def read_kept(fields: dict[str, str]) -> Kept:
    """A run's `Kept` history from its record's fields (`initial`, `initial_at`, `h:<entry id>`)."""
    start = fields.get("initial_at")
    state = fields.get("initial")
    asides = {name[2:]: json.loads(body) for name, body in fields.items() if name.startswith("h:")}
    full = fields.get("history_full")
    return Kept(
        json.loads(start) if start else None,
        json.loads(state) if state is not None else None,
        asides,
        int(full) if full not in (None, "") else None,
    )


@dataclass(frozen=True)
class Sent:
    """What a run last sent to carry itself forward: message `tag` for `queue` at `at` (ms)."""

    tag: str
    queue: str
    at: int


@dataclass(frozen=True)
class Saved:
    """What `save_items` did: how many records were new (`kept`), whether one of them was the
    last missing record of the chunk in flight (`completed`: its saver sends the join), and
    whether the write acknowledged the item message it was given (`acked`, see `Ack`)."""

    kept: int
    completed: bool = False
    acked: bool = False


@dataclass(frozen=True)
class DeadLetter:
    """A message a worker refused: why, which task, where it came from, and what it held."""

    reason: str
    task: str | None
    queue: str | None
    at: int
    body: str
    headers: dict[str, Any] = field(default_factory=dict)


class RunStore(Protocol):
    """Runs: records, state, transcripts, and the atomic commit that moves them on."""

    direct: bool  # sends go straight onto the broker's queues (the broker is this store's Redis)

    def save_graph(self, content_hash: str, definition: dict[str, Any]) -> None: ...

    def load_graph(self, content_hash: str) -> dict[str, Any] | None: ...

    def graph_versions(self, graph_id: str) -> list[GraphVersion]: ...

    def create_run(
        self, snap: RunSnapshot, fingerprint: str, sends: Sequence[Send] = (), progress: float | None = None
    ) -> Created: ...

    def create_runs(
        self, runs: Sequence[tuple[RunSnapshot, str, Sequence[Send], float | None]]
    ) -> list[Created]: ...

    def load_run(self, run_id: str, with_path: bool = False) -> RunSnapshot | None: ...

    def load_runs(self, run_ids: Sequence[str]) -> list[RunSnapshot | None]: ...

    def ended(self, run_id: str, step: int) -> list[str]: ...

    def release_ended(self, run_id: str, step: int, members: Sequence[str]) -> int: ...

    def drop_ended(self, run_id: str, step: int) -> None: ...

    def commit(
        self,
        fence: Fence,
        snap: RunSnapshot,
        records: Sequence[str] = (),
        walked: Sequence[str] = (),
        sends: Sequence[Send] = (),
        progress: float | None = None,
        ack: Ack | None = None,
        asides: Sequence[Aside] = (),
    ) -> Committed: ...

    def history(self, run_id: str) -> tuple[Kept, list[StepEntry]] | None: ...

    def run_fields(self, run_id: str) -> dict[str, str]: ...

    def status_of(self, run_id: str) -> str | None: ...

    def sent(self, run_id: str) -> Sent | None: ...

    def claim_dispatch(self, run_id: str, phase: int) -> bool: ...

    def count_redelivery(self, run_id: str, what: str) -> int: ...

    def note(self, run_id: str, record: str) -> None: ...

    def last_record(self, run_id: str) -> dict[str, Any]: ...

    def steps(self, run_id: str, after: str = "-", count: int | None = None) -> list[StepEntry]: ...

    def wait_steps(self, run_id: str, after: str, block_ms: int) -> list[StepEntry]: ...

    def status_and_steps(self, run_id: str, after: str) -> tuple[str | None, list[StepEntry]]: ...

    def watch(self, run_id: str) -> str | None: ...

    def wait_settle(self, run_id: str, block_ms: int) -> str | None: ...

    def settle_and_read(
        self, run_id: str, block_ms: int
    ) -> tuple[str | None, RunSnapshot | None, list[StepEntry]]: ...

    def unwatch(self, run_id: str) -> None: ...

    def run_and_steps(self, run_id: str) -> tuple[RunSnapshot | None, list[StepEntry]]: ...


class MessageStore(Protocol):
    """Messages kept by the store: pushed now, durable timers, outboxes, dead letters."""

    def push(self, sends: Sequence[Send], run_id: str) -> None: ...

    def pump_timers(self, now: float, limit: int = 100) -> list[Send]: ...

    def timer_due(self, run_id: str, tag: str) -> float | None: ...

    def timers_armed(self) -> int: ...

    def outbox(self, run_id: str) -> list[Send]: ...

    def drop_outbox(self, run_id: str, sends: Sequence[Send]) -> None: ...

    def dead_letter(self, letter: DeadLetter, keep: int = 10_000) -> int: ...

    def dead_letters(self, count: int = 20) -> list[DeadLetter]: ...

    def dead_total(self) -> int: ...


class ItemStore(Protocol):
    """The results of parallel foreach items, by index (the first record of an index wins)."""

    def save_item(
        self, run_id: str, tag: str, index: int, record: dict[str, Any], progress: float | None = None
    ) -> bool: ...

    def save_items(
        self,
        run_id: str,
        tag: str,
        records: Sequence[tuple[int, dict[str, Any]]],
        progress: float | None = None,
        upto: int = 0,
        ack: Ack | None = None,
    ) -> Saved: ...

    def count_items(self, run_id: str, tag: str) -> int: ...

    def item_records(self, run_id: str, tag: str, total: int) -> Iterator[dict[str, Any] | None]: ...

    def missing_items(self, run_id: str, tag: str, start: int, stop: int) -> list[int]: ...

    def drop_items(self, run_id: str, tag: str) -> None: ...


class LivenessStore(Protocol):
    """What the sweeper reads and writes: heartbeats, progress deadlines, its lock."""

    def beat(self, run_ids: Sequence[str], progress: float | None = None) -> None: ...

    def stalled(self, now: float, limit: int = 500) -> list[str]: ...

    def touch(self, run_id: str, progress: float) -> None: ...

    def activity(self, run_ids: Sequence[str]) -> list[dict[str, str]]: ...

    def lock_sweep(self, seconds: int) -> bool: ...

    def unlock_sweep(self) -> None: ...

    def swept(self, at_ms: int) -> None: ...

    def last_sweep(self) -> int | None: ...

    def signing_key(self) -> bytes: ...


class KeyStore(Protocol):
    """Concurrency keys: at most one active run per key, the others queued behind it."""

    def acquire_key(self, key: str, run_id: str, queue: bool) -> tuple[str, str | None]: ...

    def release_key(self, key: str, run_id: str) -> str | None: ...

    def key_holder(self, key: str) -> str | None: ...

    def unqueue(self, key: str, run_id: str) -> None: ...


class CacheStore(Protocol):
    """Cached node results (DESIGN §2.9)."""

    def cache_get(self, digest: str) -> tuple[bool, Any]: ...

    def cache_set(self, digest: str, value: Any, ttl: int) -> None: ...


class ListingStore(Protocol):
    """Listing runs by graph, status and time, and dropping expired runs from the indexes."""

    def list_runs(
        self, graph_id: str | None = None, status: str | None = None, limit: int = 50, offset: int = 0
    ) -> Sequence[RunSummary]: ...

    def page_runs(self, query: RunQuery) -> RunPage: ...

    def count_runs(self, status: str) -> int: ...

    def prune_expired(self, now_ms: int | None = None, batch: int = 1000) -> int: ...


class Store(RunStore, MessageStore, ItemStore, LivenessStore, KeyStore, CacheStore, ListingStore, Protocol):
    """Everything the cluster keeps; see the module docstring."""

    def ping(self) -> None: ...

    def close(self) -> None: ...


def existing_run(store: Store, run_id: str, *, with_path: bool = False) -> RunSnapshot:
    """Run `run_id` as `store` holds it (with its path, `with_path`); raises `RunNotFound`."""
    snap = store.load_run(run_id, with_path=with_path)
    if snap is None:
        raise RunNotFound(f"no run with id {run_id!r}")
    return snap
