"""`MemoryStore`: the `Store` interface in this process, for fast tests of the cluster's logic.

It keeps what `RedisStore` keeps, with the same semantics (fenced commits, indexes, expiry by
retention, progress deadlines, first-record-wins items, concurrency keys), and a broker of its
own: `queues` holds the messages a commit pushed (newest first, like a Redis list), so a test
can take them and hand them to the executor (the publisher and the sweeper see them through
`cluster.broker.MemoryBroker`). Thread-safe; nothing is shared between instances.
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from graphrunner.engine import RunSnapshot
from graphrunner.engine.snapshot import FINISHED
from graphrunner.store.base import (
    VERSIONS_KEPT,
    Ack,
    Aside,
    Committed,
    Created,
    Fence,
    Gather,
    GraphVersion,
    Kept,
    Saved,
    Send,
    Sent,
    StepEntry,
    history_start,
    read_kept,
)
from graphrunner.store.base import now_ms as _now_ms  # `now_ms` names an argument below
from graphrunner.store.memory_aux import MemoryAux
from graphrunner.store.query import RunPage, RunQuery, RunSummary, page_of

FINISHED_VALUES = frozenset(s.value for s in FINISHED)


def _stream_id(text: str) -> tuple[int, int]:
    """A stream entry id (`<ms>-<seq>`, or `<ms>`) as a comparable pair."""
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def _copy(value: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of a JSON object, so nothing read from the store shares what it keeps."""
    copied: dict[str, Any] = json.loads(json.dumps(value))
    return copied


def _newest(versions: dict[str, int]) -> list[GraphVersion]:
    """Indexed versions newest first, as a reversed Redis sorted set orders them (ties by hash)."""
    ordered = sorted(versions.items(), key=lambda entry: (entry[1], entry[0]), reverse=True)
    return [GraphVersion(content_hash, at) for content_hash, at in ordered]


@dataclass
class _Run:
    fields: dict[str, Any]
    steps: list[StepEntry] = field(default_factory=list)
    path: list[str] = field(default_factory=list)
    expires_at: int | None = None  # ms

    def expired(self, now: int) -> bool:
        return self.expires_at is not None and self.expires_at <= now


class MemoryStore(MemoryAux):
    """The in-memory implementation of `Store` (see the module docstring)."""

    def __init__(
        self, *, direct: bool = True, retention_seconds: int = 7 * 24 * 3600, history_bytes: int = 8 << 20
    ) -> None:
        super().__init__()
        self.direct = direct
        self.retention_seconds = retention_seconds
        self.history_bytes = history_bytes
        self.queues: dict[str, list[str]] = defaultdict(list)
        self._bodies: dict[str, str] = {}  # what each message sent carries, by tag
        self.graphs: dict[str, dict[str, Any]] = {}
        self._versions: dict[str, dict[str, int]] = defaultdict(dict)  # graph id: {content hash: stored at}
        self._runs: dict[str, _Run] = {}  # expired ones stay (unreadable) until pruned, as indexed ids do
        self._outboxes: dict[str, list[Send]] = defaultdict(list)  # by run id, like the run's Redis list
        self._items: dict[tuple[str, str], dict[int, dict[str, Any]]] = defaultdict(dict)
        self._timers: dict[str, tuple[int, str, str]] = {}  # tag: (due in ms, queue, body)
        self._progress: dict[str, int] = {}
        self._ended: dict[tuple[str, int], set[str]] = defaultdict(set)  # (run id, step): ended children
        self._wakes: set[tuple[str, int]] = set()  # (run id, step) whose wake-up is pending
        self._last_id = (0, 0)  # of the newest transcript entry: ids only grow, as a stream's do

    def ping(self) -> None:
        """Always answers."""

    def close(self) -> None:
        """Nothing to release."""

    # -- graphs and runs ---------------------------------------------------------------------------

    def save_graph(self, content_hash: str, definition: dict[str, Any]) -> None:
        """Store a graph definition once per content hash, and index it under its graph id."""
        with self._lock:
            self.graphs.setdefault(content_hash, _copy(definition))
            graph_id = definition.get("id")
            if isinstance(graph_id, str):
                versions = self._versions[graph_id]
                versions.setdefault(content_hash, _now_ms())
                for stale in _newest(versions)[VERSIONS_KEPT:]:
                    del versions[stale.content_hash]

    def load_graph(self, content_hash: str) -> dict[str, Any] | None:
        """The stored definition for a content hash (a copy, as a read from Redis is)."""
        stored = self.graphs.get(content_hash)
        return _copy(stored) if stored is not None else None

    def graph_versions(self, graph_id: str) -> list[GraphVersion]:
        """The versions stored for `graph_id`, newest first (the newest `VERSIONS_KEPT`)."""
        with self._lock:
            found = _newest(self._versions.get(graph_id, {}))
            return [replace(v, stored=v.content_hash in self.graphs) for v in found]

    def _run(self, run_id: str) -> _Run | None:
        """The run's record, None when there is none or its retention has passed."""
        run = self._runs.get(run_id)
        return None if run is None or run.expired(_now_ms()) else run

    def create_run(
        self, snap: RunSnapshot, fingerprint: str, sends: Sequence[Send] = (), progress: float | None = None
    ) -> Created:
        """Create the run unless its id exists: record, indexes and first messages at once."""
        with self._lock:
            existing = self._run(snap.run_id)
            if existing is not None:
                return Created(False, existing.fields["fingerprint"])
            now = _now_ms()
            fields = {"fingerprint": fingerprint, "graph_id": snap.graph_id, "created_at": now}
            self._runs[snap.run_id] = run = _Run(fields)
            self._write(run, snap, now)
            self._start_history(run, snap)
            self._set_progress(snap.run_id, progress)
            self._send(snap.run_id, run, sends, now)
            return Created(True)

    def create_runs(
        self, runs: Sequence[tuple[RunSnapshot, str, Sequence[Send], float | None]]
    ) -> list[Created]:
        """`create_run` for each (snapshot, fingerprint, sends, progress)."""
        return [self.create_run(*run) for run in runs]

    def load_runs(self, run_ids: Sequence[str]) -> list[RunSnapshot | None]:
        """`load_run` (without the path) of each run."""
        return [self.load_run(run_id) for run_id in run_ids]

    def load_run(self, run_id: str, with_path: bool = False) -> RunSnapshot | None:
        """The run's snapshot with its state (and its path when asked), or None for an unknown run."""
        with self._lock:
            run = self._run(run_id)
            if run is None:
                return None
            data = {**json.loads(run.fields["snapshot"]), "state": json.loads(run.fields["state"])}
            data["path"] = list(run.path) if with_path else ()
        return RunSnapshot.model_validate(data)

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
    ) -> Committed:
        """Write the new snapshot, if the run is at `fence`, with everything that follows it, and
        the history side records (`asides`) within the budget. Acknowledges nothing (`ack`): no
        broker keeps this store's messages unacknowledged."""
        with self._lock:
            run = self._run(snap.run_id)
            if run is None:
                return Committed(False, None, None)
            f = run.fields
            if (f["step"], f["phase"], f["status"]) != (fence.step, fence.phase, fence.status):
                return Committed(False, f["step"], f["status"])
            now = _now_ms()
            self._write(run, snap, now)
            said = snap.status.value if snap.status.value != "running" else None  # as commit_run.lua
            entries = [self._entry(record, said) for record in records]
            run.steps += entries
            self._keep_asides(run, [entry.id for entry in entries], asides)
            run.path += walked
            self._send(snap.run_id, run, sends, now)
            self._set_progress(snap.run_id, progress)
            if fence.status != snap.status.value:
                self._restatus(run, fence.status, snap.status.value, now)
            return Committed(True)

    def _write(self, run: _Run, snap: RunSnapshot, now: int) -> None:
        run.fields.update(
            step=snap.step,
            phase=snap.phase,
            status=snap.status.value,
            snapshot=snap.model_dump_json(exclude={"state", "path"}),
            state=json.dumps(snap.state),
            updated_at=now,
        )

    def _start_history(self, run: _Run, snap: RunSnapshot) -> None:
        """Keep where the run's history starts and its initial state (as create_run.lua does)."""
        state = run.fields["state"]
        start = history_start(snap, state, self.history_bytes)
        if start == "full":
            run.fields["history_full"] = snap.step
        elif start:
            run.fields.update(initial=state, initial_at=start, history_bytes=len(state))

    def _keep_asides(self, run: _Run, ids: list[str], asides: Sequence[Aside]) -> None:
        """Keep the side records while the history is within its budget (as commit_run.lua does)."""
        used = int(run.fields.get("history_bytes", -1))
        if not asides or used < 0 or "history_full" in run.fields:
            return
        for aside in asides:
            if used + len(aside.body) > self.history_bytes:
                run.fields["history_full"] = aside.step
                break
            run.fields[f"h:{ids[aside.index]}"] = aside.body
            used += len(aside.body)
        run.fields["history_bytes"] = used

    def history(self, run_id: str) -> tuple[Kept, list[StepEntry]] | None:
        """What the run keeps of its history, and its transcript (None for an unknown run)."""
        with self._lock:
            run = self._run(run_id)
            if run is None:
                return None
            fields = {k: str(v) for k, v in run.fields.items() if isinstance(v, str | int)}
            return read_kept(fields), list(run.steps)

    def _restatus(self, run: _Run, old: str, new: str, now: int) -> None:
        if new in FINISHED_VALUES:
            run.expires_at = now + self.retention_seconds * 1000
        elif old in FINISHED_VALUES:
            run.expires_at = None

    def _set_progress(self, run_id: str, progress: float | None) -> None:
        if progress is None:
            self._progress.pop(run_id, None)
        else:
            self._progress[run_id] = int(progress * 1000)

    def _entry(self, record: str, status: str | None = None) -> StepEntry:
        """A transcript entry with an id `<ms>-<seq>` above every earlier one (as Redis streams do)."""
        ms, seq = self._last_id
        now = _now_ms()
        self._last_id = (now, 0) if now > ms else (ms, seq + 1)
        return StepEntry("{}-{}".format(*self._last_id), json.loads(record), status)

    def run_fields(self, run_id: str) -> dict[str, str]:
        """The raw record fields of a run (status, step, graph_id, timestamps)."""
        with self._lock:
            run = self._run(run_id)
            wanted = ("status", "step", "graph_id", "created_at", "updated_at", "fingerprint")
            return {k: str(run.fields[k]) for k in wanted if k in run.fields} if run else {}

    def status_of(self, run_id: str) -> str | None:
        """The run's status (None for an unknown run)."""
        return self.run_fields(run_id).get("status")

    def sent(self, run_id: str) -> Sent | None:
        """The message the run last sent to carry itself forward (None if it sent none)."""
        with self._lock:
            run = self._run(run_id)
            sent: Sent | None = run.fields.get("sent") if run else None
            return sent

    def claim_dispatch(self, run_id: str, phase: int) -> bool:
        """Claim the sending of what the suspension at `phase` waits for (True once per phase)."""
        with self._lock:
            run = self._run(run_id)
            if run is None or run.fields.get("dispatched", -1) >= phase:
                return False
            run.fields["dispatched"] = phase
            return True

    def count_redelivery(self, run_id: str, what: str) -> int:
        """Count one more redelivery of `what` (a step and phase, or an item) of a run."""
        with self._lock:
            run = self._run(run_id)
            if run is None:
                return 0
            key = f"redeliveries:{what}"
            run.fields[key] = run.fields.get(key, 0) + 1
            return int(run.fields[key])

    # -- transcripts ---------------------------------------------------------------------------------

    def note(self, run_id: str, record: str) -> None:
        """Append a transcript record that commits nothing."""
        with self._lock:
            run = self._run(run_id)
            if run is not None:
                run.steps.append(self._entry(record))

    def last_record(self, run_id: str) -> dict[str, Any]:
        """The run's last transcript record ({} when it has none)."""
        with self._lock:
            run = self._run(run_id)
            return dict(run.steps[-1].record) if run and run.steps else {}

    def steps(self, run_id: str, after: str = "-", count: int | None = None) -> list[StepEntry]:
        """Transcript records after entry id `after` (exclusive; `-` for all)."""
        with self._lock:
            run = self._run(run_id)
            entries = list(run.steps) if run else []
        if after != "-":
            start = _stream_id(after)
            entries = [e for e in entries if _stream_id(e.id) > start]
        return entries[:count] if count is not None else entries

    def status_and_steps(self, run_id: str, after: str) -> tuple[str | None, list[StepEntry]]:
        """The run's status (None for an unknown run) and its records after `after`, read at once."""
        with self._lock:
            return self.status_of(run_id), self.steps(run_id, after)

    def watch(self, run_id: str) -> str | None:
        """The run's status (None for an unknown run); `wait_settle` then looks at it."""
        return self.status_of(run_id)

    def wait_settle(self, run_id: str, block_ms: int) -> str | None:
        """The status the run settled at (finished or paused), waiting up to `block_ms` for it;
        None when it has not."""
        deadline = time.monotonic() + block_ms / 1000
        while True:
            status = self.status_of(run_id)
            if status is not None and status not in ("running", "pending"):
                return status
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.005)

    def settle_and_read(
        self, run_id: str, block_ms: int
    ) -> tuple[str | None, RunSnapshot | None, list[StepEntry]]:
        """`wait_settle`, then `run_and_steps`."""
        return self.wait_settle(run_id, block_ms), *self.run_and_steps(run_id)

    def unwatch(self, run_id: str) -> None:
        """Nothing to count out: `wait_settle` looks at the status itself."""

    def run_and_steps(self, run_id: str) -> tuple[RunSnapshot | None, list[StepEntry]]:
        """The run's snapshot with its path (None for an unknown run) and its transcript, read at once."""
        with self._lock:
            return self.load_run(run_id, with_path=True), self.steps(run_id)

    def wait_steps(self, run_id: str, after: str, block_ms: int) -> list[StepEntry]:
        """Records after `after`, waiting up to `block_ms` for one to appear."""
        deadline = time.monotonic() + block_ms / 1000
        while True:
            found = self.steps(run_id, after)
            if found or time.monotonic() >= deadline:
                return found
            time.sleep(0.005)

    # -- messages --------------------------------------------------------------------------------------

    def _send(self, run_id: str, run: _Run | None, sends: Sequence[Send], now: int) -> None:
        for send in sends:
            self._bodies[send.tag] = send.body
            if send.gather is not None and send.due is None and self._gathered(send.gather):
                pass  # a wake-up of a parent step that is pending already
            elif send.due is not None:
                self._timers[send.tag] = (math.ceil(send.due * 1000), send.queue, send.body)
            elif self.direct:
                self.enqueue(send.queue, send.body)
            else:
                self._outboxes[run_id].append(send)
            if send.tracked and run is not None:
                run.fields["sent"] = Sent(send.tag, send.queue, now)

    def _gathered(self, gather: Gather) -> bool:
        """Add a gathered wake-up's member to its step's ended set; True when one is pending."""
        step = (gather.run_id, gather.step)
        if gather.member:
            self._ended[step].add(gather.member)
        pending = step in self._wakes
        self._wakes.add(step)
        return pending

    def ended(self, run_id: str, step: int) -> list[str]:
        """The child runs of the run's step that ended and are not yet taken in."""
        with self._lock:
            return sorted(self._ended.get((run_id, step), ()))

    def release_ended(self, run_id: str, step: int, members: Sequence[str]) -> int:
        """Take `members` out of the step's ended set, clear its wake-up flag: how many are left."""
        with self._lock:
            ended = self._ended.get((run_id, step), set())
            ended.difference_update(members)
            self._wakes.discard((run_id, step))
            return len(ended)

    def drop_ended(self, run_id: str, step: int) -> None:
        """Forget the step's ended set and wake-up flag."""
        with self._lock:
            self._ended.pop((run_id, step), None)
            self._wakes.discard((run_id, step))

    def push(self, sends: Sequence[Send], run_id: str) -> None:
        """Send messages no commit carries, for run `run_id` (which records the tracked one)."""
        with self._lock:
            self._send(run_id, self._run(run_id), sends, _now_ms())

    def pump_timers(self, now: float, limit: int = 100) -> list[Send]:
        """Take the timers due by `now`: pushed onto their queues when direct; returned."""
        with self._lock:
            top = int(now * 1000)
            due = sorted((t for t in self._timers.items() if t[1][0] <= top), key=lambda t: (t[1][0], t[0]))
            due = due[:limit]
            taken = []
            for tag, (_, queue, body) in due:
                del self._timers[tag]
                if self.direct:
                    self.enqueue(queue, body)
                taken.append(Send(queue, body, tag=""))
            return taken

    def enqueue(self, queue: str, body: str) -> None:
        """Put a message on `queue` (newest first: the oldest is the last)."""
        with self._lock:
            self.queues[queue].insert(0, body)

    def waiting(self, tag: str, queue: str) -> bool:
        """The message sent with `tag` is waiting on `queue`."""
        with self._lock:
            body = self._bodies.get(tag)
            return body is not None and body in self.queues.get(queue, ())

    def timer_due(self, run_id: str, tag: str) -> float | None:
        """When run `run_id`'s durable timer `tag` comes due (epoch s), None when it is not armed."""
        with self._lock:
            timer = self._timers.get(tag)
        return None if timer is None else timer[0] / 1000

    def timers_armed(self) -> int:
        """How many durable timers are armed."""
        return len(self._timers)

    def outbox(self, run_id: str) -> list[Send]:
        """The run's messages committed but not yet published (oldest first)."""
        with self._lock:
            return list(self._outboxes.get(run_id, ()))

    def drop_outbox(self, run_id: str, sends: Sequence[Send]) -> None:
        """Drop these messages (published) from the run's outbox, each by its tag."""
        tags = {s.tag for s in sends}
        with self._lock:
            kept = [s for s in self._outboxes.get(run_id, ()) if s.tag not in tags]
            if run_id in self._outboxes:
                self._outboxes[run_id] = kept

    # -- items -------------------------------------------------------------------------------------------

    def save_item(
        self, run_id: str, tag: str, index: int, record: dict[str, Any], progress: float | None = None
    ) -> bool:
        """Record one foreach item's result; the first record of an index wins."""
        return self.save_items(run_id, tag, [(index, record)], progress).kept == 1

    def save_items(
        self,
        run_id: str,
        tag: str,
        records: Sequence[tuple[int, dict[str, Any]]],
        progress: float | None = None,
        upto: int = 0,
        ack: Ack | None = None,
    ) -> Saved:
        """Record foreach items' results; the first record of an index wins; `completed` when one
        of them was the `upto`-th. Acknowledges nothing (`ack`), as `commit`."""
        kept, completed = 0, False
        with self._lock:
            items = self._items[(run_id, tag)]
            for index, record in records:
                if index in items:
                    continue
                items[index] = _copy(record)
                kept += 1
                completed = completed or len(items) == upto
            run = self._run(run_id)
            if run is not None:
                run.fields["heartbeat"] = _now_ms()
                if progress is not None and run_id in self._progress:
                    self._progress[run_id] = max(self._progress[run_id], int(progress * 1000))
            return Saved(kept, completed)

    def count_items(self, run_id: str, tag: str) -> int:
        """How many distinct items of a foreach have a result."""
        return len(self._items.get((run_id, tag), {}))

    def item_records(self, run_id: str, tag: str, total: int) -> Iterator[dict[str, Any] | None]:
        """The results of items 0..total-1 in item order (None where missing), one at a time."""
        with self._lock:
            items = dict(self._items.get((run_id, tag), {}))
        return (_copy(items[i]) if i in items else None for i in range(total))

    def missing_items(self, run_id: str, tag: str, start: int, stop: int) -> list[int]:
        """The indexes in `[start, stop)` with no recorded result."""
        with self._lock:
            items = set(self._items.get((run_id, tag), {}))
        return [i for i in range(start, stop) if i not in items]

    def drop_items(self, run_id: str, tag: str) -> None:
        """Delete a finished foreach's item results."""
        with self._lock:
            self._items.pop((run_id, tag), None)

    # -- liveness ------------------------------------------------------------------------------------------

    def beat(self, run_ids: Sequence[str], progress: float | None = None) -> None:
        """Record a heartbeat on runs in flight; push their progress deadline to `progress`."""
        with self._lock:
            now = _now_ms()
            for run_id in run_ids:
                run = self._run(run_id)
                if run is None:
                    continue
                run.fields["heartbeat"] = now
                if run_id in self._progress:
                    deadline = int((progress or 0) * 1000) or now
                    self._progress[run_id] = max(self._progress[run_id], deadline)

    def stalled(self, now: float, limit: int = 500) -> list[str]:
        """Running runs whose progress deadline has passed by `now` (epoch s), earliest first."""
        top = int(now * 1000)
        with self._lock:
            due = sorted((score, run_id) for run_id, score in self._progress.items() if score <= top)
        return [run_id for _, run_id in due[:limit]]

    def touch(self, run_id: str, progress: float) -> None:
        """Set the run's progress deadline to `progress` (epoch s), if it is watched."""
        with self._lock:
            if run_id in self._progress:
                self._progress[run_id] = int(progress * 1000)

    def activity(self, run_ids: Sequence[str]) -> list[dict[str, str]]:
        """Per run: status, step, phase, updated_at and heartbeat (ms)."""
        wanted = ("status", "step", "phase", "updated_at", "heartbeat")
        with self._lock:
            runs = [self._run(r) for r in run_ids]
            return [{k: str(r.fields[k]) for k in wanted if k in r.fields} if r else {} for r in runs]

    # -- listing -------------------------------------------------------------------------------------------

    def list_runs(
        self, graph_id: str | None = None, status: str | None = None, limit: int = 50, offset: int = 0
    ) -> Sequence[RunSummary]:
        """Runs newest first, filtered by graph id and/or status."""
        return list(self.page_runs(RunQuery.build(graph_id, status, limit, offset)).runs)

    def page_runs(self, query: RunQuery) -> RunPage:
        """A page of runs matching `query`, newest first (ties by run id, descending)."""
        with self._lock:
            rows = [self._summary(run_id) for run_id in list(self._runs)]
        return page_of([r for r in rows if r is not None], query)

    def count_runs(self, status: str) -> int:
        """How many runs are in `status` now."""
        with self._lock:
            return sum(1 for run in self._runs.values() if run.fields.get("status") == status)

    def _summary(self, run_id: str) -> RunSummary | None:
        run = self._run(run_id)
        if run is None:
            return None
        f = run.fields
        return RunSummary(
            run_id, f["graph_id"], f["status"], int(f["step"]), f["created_at"], f["updated_at"]
        )

    def prune_expired(self, now_ms: int | None = None, batch: int = 1000) -> int:
        """Forget runs whose retention has passed (by `now_ms`, and by now); how many were pruned."""
        if batch < 1:
            raise ValueError(f"batch must be at least 1, got {batch}")
        now = min(_now_ms(), _now_ms() if now_ms is None else now_ms)
        with self._lock:
            gone = [r for r, run in self._runs.items() if run.expired(now)]
            for run_id in gone:
                del self._runs[run_id]
            return len(gone)
