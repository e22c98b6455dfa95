"""The conformance suite of the `Store` interface: one class of tests every implementation passes.

As huey's storage tests do, `StoreContract` states what each operation means, and a subclass per
backend runs it: `tests/unit/test_memory_store.py` (MemoryStore) and
`tests/integration/test_redis_store.py` (RedisStore on a real Redis). A subclass provides:

- `make_store`: a fixture returning a factory of stores over one empty backend,
  `make_store(direct=..., retention_seconds=...)`;
- `queued(store, queue)`: the bodies waiting on a queue of the store's broker, newest first;
- `freeze_clock(monkeypatch, ms)`: the store stamps what it writes with `ms` from now on;
- `forget_graph(store, content_hash)`: delete a stored definition behind the store's back (as
  an operator may); `StoreContract` does it for `MemoryStore`, `RedisStoreContract` for Redis.

Every test runs against a store whose sends go straight onto the queues (`direct`) and one
that keeps them in the run's outbox (`outbox`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from graphrunner.engine import RunSnapshot, RunStatus
from graphrunner.store import (
    Aside,
    Committed,
    Created,
    DeadLetter,
    Fence,
    Gather,
    GraphVersion,
    Kept,
    RedisStore,
    RunPage,
    RunQuery,
    RunSummary,
    Saved,
    Send,
    Store,
    keys,
)
from graphrunner.store.base import VERSIONS_KEPT
from graphrunner.store.memory_store import MemoryStore

QUEUE = "gr-test-main"
OTHER = "gr-test-other"
T0 = 1_700_000_000_000  # a creation time (ms) for tests that pin the store's clock
StoreFactory = Callable[..., Store]


# -- helpers ----------------------------------------------------------------------------------------


def snapshot(run_id: str = "run-1", graph_id: str = "g/one", **changes: Any) -> RunSnapshot:
    """A fresh run at its first node."""
    fields: dict[str, Any] = {"run_id": run_id, "graph_id": graph_id, "node": "work", "state": {"n": 0}}
    return RunSnapshot(**{**fields, **changes})


def moved(snap: RunSnapshot, **changes: Any) -> RunSnapshot:
    """`snap` one step on, its state counting the steps."""
    update = {"step": snap.step + 1, "state": {"n": snap.state.get("n", 0) + 1}, **changes}
    return snap.model_copy(update=update)


def message(body: str, queue: str = QUEUE, *, due: float | None = None, tracked: bool = False) -> Send:
    """A message whose tag is derived from its body."""
    return Send(queue, body, f"tag-{body}", due=due, tracked=tracked)


def record(step: int, status: str = "ok") -> str:
    """A transcript record (JSON)."""
    return json.dumps({"step": step, "node": "work", "status": status})


def wait_until(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    """Poll `check` until it holds; fail naming `what` after a generous `timeout`."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.05)


def now_ms() -> int:
    return int(time.time() * 1000)


def ids(runs: list[RunSummary] | tuple[RunSummary, ...]) -> list[str]:
    return [r.run_id for r in runs]


class StoreContract:
    """What every `Store` does (see the module docstring for what a subclass provides)."""

    @pytest.fixture(params=[True, False], ids=["direct", "outbox"])
    def store(self, request: pytest.FixtureRequest, make_store: StoreFactory) -> Store:
        return make_store(direct=request.param)

    def queued(self, store: Store, queue: str) -> list[str]:
        """The bodies waiting on `queue`, newest first."""
        raise NotImplementedError

    def freeze_clock(self, monkeypatch: pytest.MonkeyPatch, ms: int) -> None:
        """Make the store stamp creations, commits and sends with `ms`."""
        raise NotImplementedError

    def forget_graph(self, store: Store, content_hash: str) -> None:
        """Delete the stored definition of `content_hash`, leaving its index entry."""
        assert isinstance(store, MemoryStore), "a subclass for another store overrides this"
        del store.graphs[content_hash]

    def created(self, store: Store, snap: RunSnapshot, sends: tuple[Send, ...] = ()) -> RunSnapshot:
        assert store.create_run(snap, "fp", sends) == Created(True)
        return snap

    def commit(self, store: Store, old: RunSnapshot, new: RunSnapshot, **kwargs: Any) -> RunSnapshot:
        assert store.commit(Fence.of(old), new, **kwargs).committed
        return new

    # -- graphs and run records --------------------------------------------------------------------

    def test_a_graph_definition_is_stored_once_per_content_hash(self, store: Store) -> None:
        assert store.load_graph("h1") is None
        store.save_graph("h1", {"id": "g/one", "text": "first"})
        store.save_graph("h1", {"id": "g/one", "text": "second"})
        assert store.load_graph("h1") == {"id": "g/one", "text": "first"}

    def test_stored_versions_are_indexed_by_graph_id_newest_first(
        self, store: Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        assert store.graph_versions("g/one") == []
        for ms, content_hash, graph_id in ((1, "h1", "g/one"), (2, "h2", "g/one"), (3, "h3", "g/two")):
            self.freeze_clock(monkeypatch, T0 + ms)
            store.save_graph(content_hash, {"id": graph_id, "text": content_hash})
        self.freeze_clock(monkeypatch, T0 + 4)
        store.save_graph("h1", {"id": "g/one", "text": "again"})  # stored once: keeps its first time
        store.save_graph("h4", {"text": "no id"})  # stored, indexed under no graph id
        assert store.graph_versions("g/one") == [GraphVersion("h2", T0 + 2), GraphVersion("h1", T0 + 1)]
        assert store.graph_versions("g/two") == [GraphVersion("h3", T0 + 3)]
        assert store.load_graph("h4") == {"text": "no id"}

    def test_the_version_index_keeps_the_newest_versions(
        self, store: Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        for i in range(VERSIONS_KEPT + 2):
            self.freeze_clock(monkeypatch, T0 + i)
            store.save_graph(f"h{i:03d}", {"id": "g/busy", "text": str(i)})
        versions = store.graph_versions("g/busy")
        assert len(versions) == VERSIONS_KEPT
        assert versions[0] == GraphVersion(f"h{VERSIONS_KEPT + 1:03d}", T0 + VERSIONS_KEPT + 1)
        assert versions[-1] == GraphVersion("h002", T0 + 2)
        assert store.load_graph("h000") == {"id": "g/busy", "text": "0"}  # trimmed from the index only

    def test_an_indexed_version_whose_definition_is_gone_is_marked(self, store: Store) -> None:
        store.save_graph("h1", {"id": "g/one", "text": "first"})
        store.save_graph("h2", {"id": "g/one", "text": "second"})
        self.forget_graph(store, "h1")
        versions = {v.content_hash: v.stored for v in store.graph_versions("g/one")}
        assert versions == {"h1": False, "h2": True}

    def test_create_run_stores_the_snapshot_and_its_record(self, store: Store) -> None:
        snap = snapshot(inputs={"name": "Ada"}, capabilities=("tool:echo",), concurrency_key="k")
        before = now_ms()
        assert store.create_run(snap, "fp-1") == Created(True)
        assert store.load_run("run-1") == snap
        fields = store.run_fields("run-1")
        assert {k: fields[k] for k in ("status", "step", "graph_id", "fingerprint")} == {
            "status": "running",
            "step": "0",
            "graph_id": "g/one",
            "fingerprint": "fp-1",
        }
        assert before <= int(fields["created_at"]) == int(fields["updated_at"]) <= now_ms()
        assert store.status_of("run-1") == "running"

    def test_an_unknown_run_has_nothing(self, store: Store) -> None:
        assert store.load_run("ghost") is None
        assert store.load_run("ghost", with_path=True) is None
        assert store.run_fields("ghost") == {}
        assert store.status_of("ghost") is None
        assert store.sent("ghost") is None
        assert store.steps("ghost") == [] and store.last_record("ghost") == {}
        assert store.activity(["ghost"]) == [{}]

    def test_creating_an_existing_run_changes_nothing_and_sends_nothing(self, store: Store) -> None:
        first = self.created(store, snapshot(), (message("first", tracked=True),))
        sent = store.sent("run-1")
        other = snapshot(state={"n": 99}, node="elsewhere")
        again = store.create_run(other, "fp-2", [message("second", tracked=True)], progress=time.time() - 60)
        assert again == Created(False, "fp")
        assert store.load_run("run-1") == first
        assert store.sent("run-1") == sent
        assert "second" not in self.queued(store, QUEUE)
        assert [s.body for s in store.outbox("run-1")] == ([] if store.direct else ["first"])
        assert store.stalled(time.time()) == []

    def test_create_run_sends_its_first_messages(self, store: Store) -> None:
        before = now_ms()
        sends = (message("step", tracked=True), message("other", OTHER))
        self.created(store, snapshot(), sends)
        if store.direct:
            assert self.queued(store, QUEUE) == ["step"] and self.queued(store, OTHER) == ["other"]
            assert store.outbox("run-1") == []
        else:
            assert self.queued(store, QUEUE) == [] and self.queued(store, OTHER) == []
            assert store.outbox("run-1") == list(sends)
        sent = store.sent("run-1")
        assert sent is not None and (sent.tag, sent.queue) == ("tag-step", QUEUE)
        assert before <= sent.at <= now_ms()

    def test_an_untracked_send_is_not_recorded_as_the_runs(self, store: Store) -> None:
        self.created(store, snapshot(), (message("wake"),))
        assert store.sent("run-1") is None

    def test_create_run_arms_timers_for_sends_with_a_due_time(self, store: Store) -> None:
        due = time.time() + 3600
        self.created(store, snapshot(), (message("later", due=due, tracked=True),))
        assert store.timer_due("run-1", "tag-later") == pytest.approx(due, abs=0.001)
        assert self.queued(store, QUEUE) == [] and store.outbox("run-1") == []
        sent = store.sent("run-1")
        assert sent is not None and sent.tag == "tag-later"

    def test_create_run_sets_the_progress_deadline(self, store: Store) -> None:
        now = time.time()
        assert store.create_run(snapshot("late"), "fp", progress=now - 10).created
        assert store.create_run(snapshot("early"), "fp", progress=now + 3600).created
        assert store.create_run(snapshot("unwatched"), "fp").created
        assert store.stalled(now) == ["late"]
        assert store.stalled(now + 7200) == ["late", "early"]

    def test_a_run_created_mid_step_is_fenced_where_its_snapshot_is(self, store: Store) -> None:
        snap = self.created(store, snapshot(step=3, phase=2))
        assert store.load_run("run-1") == snap
        assert store.activity(["run-1"])[0]["phase"] == "2"
        self.commit(store, snap, moved(snap, phase=0))

    # -- commit ------------------------------------------------------------------------------------

    def test_commit_writes_the_snapshot_records_and_path(self, store: Store) -> None:
        first = self.created(store, snapshot())
        created_at = store.run_fields("run-1")["created_at"]
        second = self.commit(store, first, moved(first), records=[record(1)], walked=["work"])
        third = moved(second, node="done", phase=0)
        self.commit(store, second, third, records=[record(2), record(2, "retry")], walked=["a", "b"])
        assert store.load_run("run-1") == third
        assert store.load_run("run-1", with_path=True) == third.model_copy(
            update={"path": ("work", "a", "b")}
        )
        assert [e.record for e in store.steps("run-1")] == [
            json.loads(r) for r in (record(1), record(2), record(2, "retry"))
        ]
        fields = store.run_fields("run-1")
        assert fields["step"] == "2" and fields["created_at"] == created_at
        assert int(fields["updated_at"]) >= int(created_at)

    @pytest.mark.parametrize(
        "fence",
        [Fence(1, 0, "running"), Fence(0, 1, "running"), Fence(0, 0, "paused")],
        ids=["step", "phase", "status"],
    )
    def test_commit_is_fenced_on_step_phase_and_status(self, store: Store, fence: Fence) -> None:
        first = self.created(store, snapshot())
        late = moved(first, status=RunStatus.COMPLETED)
        sends = [message("next", tracked=True), message("timer", due=time.time() + 60)]
        reply = store.commit(fence, late, [record(1)], ["work"], sends, progress=time.time() - 60)
        assert reply == Committed(False, 0, "running")
        assert store.load_run("run-1", with_path=True) == first
        assert store.steps("run-1") == [] and store.sent("run-1") is None
        assert self.queued(store, QUEUE) == [] and store.outbox("run-1") == []
        assert store.timer_due("run-1", "tag-timer") is None and store.stalled(time.time()) == []
        assert ids(store.list_runs(status="completed")) == []

    def test_commit_of_an_unknown_run_is_fenced_off(self, store: Store) -> None:
        reply = store.commit(Fence(0), snapshot("ghost"), [record(1)], sends=[message("x")])
        assert reply == Committed(False, None, None)
        assert store.load_run("ghost") is None and self.queued(store, QUEUE) == []

    def test_commit_sends_in_order_and_records_the_tracked_one(self, store: Store) -> None:
        first = self.created(store, snapshot())
        sends = [message("a"), message("b", tracked=True), message("c", OTHER)]
        before = now_ms()
        second = moved(first)
        reply = store.commit(Fence.of(first), second, sends=sends)
        if store.direct:
            assert self.queued(store, QUEUE) == ["b", "a"] and self.queued(store, OTHER) == ["c"]
            assert store.outbox("run-1") == [] and reply == Committed(True)
        else:
            assert self.queued(store, QUEUE) == [] and store.outbox("run-1") == sends
            assert reply == Committed(True)
            later = store.commit(Fence.of(second), moved(second), sends=[message("d")])
            assert later == Committed(True) and store.outbox("run-1") == [*sends, message("d")]
        sent = store.sent("run-1")
        assert sent is not None and (sent.tag, sent.queue) == ("tag-b", QUEUE)
        assert before <= sent.at <= now_ms()

    def test_commit_sets_and_removes_the_progress_deadline(self, store: Store) -> None:
        first = self.created(store, snapshot(), ())
        now = time.time()
        second = self.commit(store, first, moved(first), progress=now - 5)
        assert store.stalled(now) == ["run-1"]
        third = self.commit(store, second, moved(second), progress=now + 3600)
        assert store.stalled(now) == []
        self.commit(store, third, moved(third, status=RunStatus.PAUSED), progress=None)
        assert store.stalled(now + 7200) == []

    def test_a_status_change_moves_the_run_between_status_listings(self, store: Store) -> None:
        first = self.created(store, snapshot())
        self.created(store, snapshot("run-2", "g/two"))
        paused = self.commit(store, first, moved(first, status=RunStatus.PAUSED))
        assert ids(store.list_runs(status="paused")) == ["run-1"]
        assert ids(store.list_runs(status="running")) == ["run-2"]
        self.commit(store, paused, moved(paused, status=RunStatus.FAILED))
        assert ids(store.list_runs(status="paused")) == []
        assert ids(store.list_runs(status="failed")) == ["run-1"]
        assert ids(store.list_runs(status="failed", graph_id="g/one")) == ["run-1"]
        assert ids(store.list_runs(status="failed", graph_id="g/two")) == []
        assert [r.status for r in store.list_runs(graph_id="g/one")] == ["failed"]
        assert [store.count_runs(s) for s in ("running", "paused", "failed", "pending")] == [1, 0, 1, 0]

    def test_a_finished_run_expires_after_the_retention(self, make_store: StoreFactory) -> None:
        store = make_store(retention_seconds=1)
        first = self.created(store, snapshot("done"))
        self.commit(store, first, moved(first, status=RunStatus.COMPLETED), records=[record(1)], walked=["w"])
        alive = self.created(store, snapshot("alive"))
        assert store.load_run("done") is not None  # kept until the retention has passed
        wait_until(lambda: store.load_run("done") is None, "the finished run to expire")
        assert store.steps("done") == [] and store.run_fields("done") == {}
        assert ids(store.list_runs()) == ["alive"]
        assert ids(store.list_runs(status="completed")) == []
        assert store.prune_expired() == 1
        assert store.prune_expired() == 0
        assert store.load_run("alive") == alive

    def test_a_resumed_run_is_kept_again(self, make_store: StoreFactory) -> None:
        store = make_store(retention_seconds=1)
        resumed = self.created(store, snapshot("resumed"))
        failed = self.commit(store, resumed, moved(resumed, status=RunStatus.FAILED), records=[record(1)])
        running = self.commit(store, failed, moved(failed, status=RunStatus.RUNNING, phase=1))
        other = self.created(store, snapshot("other"))  # finished after the resumed run failed
        self.commit(store, other, moved(other, status=RunStatus.COMPLETED))
        wait_until(lambda: store.load_run("other") is None, "the other finished run to expire")
        assert store.load_run("resumed") == running  # its expiry was lifted
        assert len(store.steps("resumed")) == 1
        assert store.prune_expired() == 1
        assert ids(store.list_runs()) == ["resumed"]

    def test_nothing_is_pruned_before_its_record_has_expired(self, store: Store) -> None:
        first = self.created(store, snapshot())
        self.commit(store, first, moved(first, status=RunStatus.COMPLETED))
        assert store.prune_expired(now_ms() + 30 * 24 * 3600 * 1000) == 0
        assert store.load_run("run-1") is not None
        assert ids(store.list_runs(status="completed")) == ["run-1"]
        with pytest.raises(ValueError, match="batch"):
            store.prune_expired(batch=0)

    # -- what a run records besides commits --------------------------------------------------------

    def test_claim_dispatch_succeeds_once_per_phase(self, store: Store) -> None:
        self.created(store, snapshot())
        assert store.claim_dispatch("run-1", 1) is True
        assert store.claim_dispatch("run-1", 1) is False
        assert store.claim_dispatch("run-1", 3) is True
        assert store.claim_dispatch("run-1", 2) is False
        assert store.claim_dispatch("run-1", 3) is False

    def test_count_redelivery_counts_per_what(self, store: Store) -> None:
        self.created(store, snapshot())
        assert [store.count_redelivery("run-1", "1.0") for _ in range(3)] == [1, 2, 3]
        assert store.count_redelivery("run-1", "1.1") == 1
        assert store.count_redelivery("run-1", "item:t:0") == 1

    def test_note_appends_a_record_without_committing(self, store: Store) -> None:
        first = self.created(store, snapshot())
        assert store.last_record("run-1") == {}
        store.note("run-1", json.dumps({"action": "resent_step"}))
        assert store.last_record("run-1") == {"action": "resent_step"}
        assert store.load_run("run-1") == first
        self.commit(store, first, moved(first), records=[record(1)])
        assert store.last_record("run-1") == json.loads(record(1))

    def test_steps_reads_after_an_entry_and_up_to_a_count(self, store: Store) -> None:
        first = self.created(store, snapshot())
        self.commit(store, first, moved(first), records=[record(i) for i in range(1, 5)])
        entries = store.steps("run-1")
        assert [e.record["step"] for e in entries] == [1, 2, 3, 4]
        assert len({e.id for e in entries}) == 4
        assert store.steps("run-1", after=entries[1].id) == entries[2:]
        assert store.steps("run-1", count=2) == entries[:2]
        assert store.steps("run-1", after=entries[0].id, count=1) == entries[1:2]
        assert store.steps("run-1", after=entries[3].id) == []
        assert store.steps("run-1", after="0-0") == entries  # any stream id, not only one of these
        assert store.steps("run-1", after=f"{now_ms() + 60_000}-0") == []

    def test_wait_steps_returns_what_is_there_or_what_comes(self, store: Store) -> None:
        first = self.created(store, snapshot())
        self.commit(store, first, moved(first), records=[record(1)])
        [entry] = store.wait_steps("run-1", "0", 1000)
        assert entry.record == json.loads(record(1))
        assert store.wait_steps("run-1", entry.id, 50) == []
        later = threading.Timer(0.2, lambda: store.note("run-1", json.dumps({"late": True})))
        later.start()
        try:
            found = store.wait_steps("run-1", entry.id, 20_000)
        finally:
            later.join()
        assert [e.record for e in found] == [{"late": True}]

    def test_the_records_of_a_commit_that_stops_the_run_say_its_status(self, store: Store) -> None:
        first = self.created(store, snapshot())
        assert store.status_and_steps("run-1", "0-0") == ("running", [])
        second = self.commit(store, first, moved(first), records=[record(1)])
        paused = self.commit(store, second, moved(second, status=RunStatus.PAUSED), records=[record(2)])
        store.note("run-1", json.dumps({"action": "resent_step"}))
        self.commit(store, paused, moved(paused, status=RunStatus.FAILED), records=[record(3), record(3)])
        entries = store.steps("run-1")
        assert [e.status for e in entries] == [None, "paused", None, "failed", "failed"]
        assert store.status_and_steps("run-1", "0-0") == ("failed", entries)
        assert store.status_and_steps("run-1", entries[2].id) == ("failed", entries[3:])
        assert store.status_and_steps("ghost", "0-0") == (None, [])

    def test_a_watcher_is_woken_by_the_commit_that_settles_the_run(self, store: Store) -> None:
        first = self.created(store, snapshot())
        assert store.watch("run-1") == "running"
        assert store.wait_settle("run-1", 50) is None
        second = self.commit(store, first, moved(first), records=[record(1)])
        assert store.wait_settle("run-1", 50) is None  # a step that goes on wakes no one
        assert store.settle_and_read("run-1", 50) == (None, second, store.steps("run-1"))
        paused = moved(second, status=RunStatus.PAUSED)
        later = threading.Timer(0.2, lambda: self.commit(store, second, paused, records=[record(2)]))
        later.start()
        try:  # the reads see the run as the commit that settled it left it
            assert store.settle_and_read("run-1", 20_000) == ("paused", paused, store.steps("run-1"))
        finally:
            later.join()
        assert store.watch("run-1") == "paused" and store.watch("ghost") is None
        assert store.run_and_steps("run-1") == (paused, store.steps("run-1"))
        assert store.run_and_steps("ghost") == (None, [])

    # -- history ---------------------------------------------------------------------------------------

    def test_a_run_keeps_where_its_history_starts_and_its_initial_state(self, store: Store) -> None:
        first = self.created(store, snapshot(state={"n": 0, "text": "hi"}))
        self.commit(store, first, moved(first), records=[record(1)])
        found = store.history("run-1")
        assert found is not None
        kept, entries = found
        assert kept.state == {"n": 0, "text": "hi"} and kept.full_at is None
        assert kept.start == {"node": "work", "step": 0, "status": "running", "graph_hash": ""}
        assert [e.record for e in entries] == [json.loads(record(1))] and kept.asides == {}
        assert store.history("never") is None

    def test_side_records_are_kept_with_the_records_they_belong_to(self, store: Store) -> None:
        first = self.created(store, snapshot())
        asides = [Aside(1, 1, json.dumps({"big": "x" * 100}))]
        self.commit(store, first, moved(first), records=[record(1, "retry"), record(1)], asides=asides)
        found = store.history("run-1")
        assert found is not None
        kept, entries = found
        assert kept.asides == {entries[1].id: {"big": "x" * 100}}
        assert store.load_run("run-1") == moved(first)  # nothing of it in the snapshot

    def test_past_its_budget_a_run_keeps_no_more_side_records(self, make_store: StoreFactory) -> None:
        store = make_store(history_bytes=300)
        first = self.created(store, snapshot())  # {"n": 0}: 8 bytes
        second = self.commit(
            store, first, moved(first), records=[record(1)], asides=[Aside(0, 1, "[" + "1," * 100 + "1]")]
        )
        self.commit(
            store, second, moved(second), records=[record(2)], asides=[Aside(0, 2, "[" + "2," * 100 + "2]")]
        )
        found = store.history("run-1")
        assert found is not None
        kept, entries = found
        assert list(kept.asides) == [entries[0].id] and kept.full_at == 2
        over = self.created(store, snapshot("over", state={"text": "y" * 400}))
        kept_over = store.history(over.run_id)
        assert kept_over is not None and kept_over[0].start is None and kept_over[0].full_at == 0

    def test_a_budget_of_zero_keeps_no_history(self, make_store: StoreFactory) -> None:
        store = make_store(history_bytes=0)
        first = self.created(store, snapshot())
        self.commit(store, first, moved(first), records=[record(1)], asides=[Aside(0, 1, "{}")])
        found = store.history("run-1")
        assert found is not None
        assert found[0] == Kept(None, None, {}, None)

    def test_a_finished_runs_history_expires_with_it(self, make_store: StoreFactory) -> None:
        store = make_store(retention_seconds=1)
        first = self.created(store, snapshot("done"))
        asides = [Aside(0, 1, "{}")]
        self.commit(
            store, first, moved(first, status=RunStatus.COMPLETED), records=[record(1)], asides=asides
        )
        assert store.history("done") is not None
        wait_until(lambda: store.history("done") is None, "the finished run's history to expire")

    # -- messages ----------------------------------------------------------------------------------

    def test_push_sends_for_a_run_and_records_its_tracked_message(self, store: Store) -> None:
        first = self.created(store, snapshot())
        before = now_ms()
        sends = [message("resent", tracked=True), message("item", OTHER)]
        store.push(sends, "run-1")
        sent = store.sent("run-1")
        assert sent is not None and (sent.tag, sent.queue) == ("tag-resent", QUEUE)
        assert before <= sent.at <= now_ms()
        if store.direct:
            assert self.queued(store, QUEUE) == ["resent"] and self.queued(store, OTHER) == ["item"]
        else:
            assert store.outbox("run-1") == sends and self.queued(store, QUEUE) == []
        assert store.load_run("run-1") == first
        store.push([], "run-1")
        assert store.sent("run-1") == sent

    def test_push_without_a_run_sends_and_creates_no_run(self, store: Store) -> None:
        store.push([message("orphan", tracked=True)], "ghost")
        assert store.load_run("ghost") is None and store.run_fields("ghost") == {}
        assert store.sent("ghost") is None
        if store.direct:
            assert self.queued(store, QUEUE) == ["orphan"]
        else:
            assert [s.body for s in store.outbox("ghost")] == ["orphan"]

    def test_push_arms_a_timer(self, store: Store) -> None:
        self.created(store, snapshot())
        due = time.time() + 600
        store.push([message("poll", due=due)], "run-1")
        assert store.timer_due("run-1", "tag-poll") == pytest.approx(due, abs=0.001)
        assert self.queued(store, QUEUE) == [] and store.outbox("run-1") == []

    def test_pump_timers_takes_only_the_due_ones_earliest_first(self, store: Store) -> None:
        now = time.time()
        self.created(store, snapshot())
        timers = [
            message("second", due=now - 5),
            message("later", due=now + 3600),
            message("first", OTHER, due=now - 10),
            message("third", due=now - 1),
        ]
        store.push(timers, "run-1")
        taken = store.pump_timers(now, limit=2)
        assert [(s.queue, s.body) for s in taken] == [(OTHER, "first"), (QUEUE, "second")]
        taken = store.pump_timers(now)
        assert [(s.queue, s.body) for s in taken] == [(QUEUE, "third")]
        assert store.pump_timers(now) == []
        assert store.timer_due("run-1", "tag-first") is None and store.timer_due("run-1", "tag-third") is None
        assert store.timer_due("run-1", "tag-later") == pytest.approx(now + 3600, abs=0.001)
        if store.direct:
            assert self.queued(store, QUEUE) == ["third", "second"] and self.queued(store, OTHER) == ["first"]
        else:
            assert self.queued(store, QUEUE) == [] and self.queued(store, OTHER) == []
        assert store.outbox("run-1") == []
        assert [s.body for s in store.pump_timers(now + 7200)] == ["later"]

    def test_a_timer_is_never_taken_before_its_due_time(self, store: Store) -> None:
        # Timers are kept in milliseconds: rounding a due time down would move the message
        # up to a millisecond early, and the step it wakes would find its wait not over yet.
        due = float(int(time.time()) - 60) + 0.0006
        self.created(store, snapshot())
        store.push([message("poll", due=due)], "run-1")
        assert store.pump_timers(due - 0.0002) == []
        assert [s.body for s in store.pump_timers(due + 0.001)] == ["poll"]

    def test_the_outbox_keeps_what_is_to_be_published_until_dropped(self, store: Store) -> None:
        first = self.created(store, snapshot(), (message("one"),))
        self.commit(store, first, moved(first), sends=[message("two"), message("three")])
        if store.direct:
            assert store.outbox("run-1") == []
            assert self.queued(store, QUEUE) == ["three", "two", "one"]
            return
        assert [s.body for s in store.outbox("run-1")] == ["one", "two", "three"]
        # dropped by entry, not by position: what another commit put there meanwhile stays
        store.drop_outbox("run-1", [message("two")])
        assert [s.body for s in store.outbox("run-1")] == ["one", "three"]
        store.drop_outbox("run-1", [message("one"), message("three"), message("never there")])
        assert store.outbox("run-1") == []
        assert self.queued(store, QUEUE) == []

    def test_a_gathered_wake_up_goes_once_until_its_ended_set_is_taken(self, store: Store) -> None:
        kids = [self.created(store, snapshot(f"p.1.{i}")) for i in range(3)]

        def ended(kid: RunSnapshot) -> None:  # the kid's last commit wakes step 1 of run p, gathered
            wake = Send(QUEUE, f"wake-{kid.run_id}", f"tag-{kid.run_id}", gather=Gather("p", 1, kid.run_id))
            self.commit(store, kid, moved(kid, status=RunStatus.COMPLETED), sends=[wake])

        def sent() -> list[str]:
            return self.queued(store, QUEUE) if store.direct else [s.body for s in store.outbox("p.1.0")]

        ended(kids[0])
        ended(kids[1])  # one is pending: nothing more is sent
        if isinstance(store, RedisStore) and store.keys.clustered:  # a kid's commit is on its own slot
            assert [s.body for s in store.outbox("p.1.1")] == ["wake-p.1.1"]  # each wake-up names its kid
            assert store.ended("p", 1) == []
            return
        assert sent() == ["wake-p.1.0"] and store.ended("p", 1) == ["p.1.0", "p.1.1"]
        assert store.ended("p", 2) == []
        ended(kids[2])  # the step is being woken: still nothing more is sent
        assert sent() == ["wake-p.1.0"]
        assert store.release_ended("p", 1, ["p.1.0", "p.1.1"]) == 1  # counted: one is left to take in
        assert store.ended("p", 1) == ["p.1.2"]
        store.drop_ended("p", 1)
        assert store.ended("p", 1) == [] and store.release_ended("p", 1, []) == 0

    def test_a_released_step_is_woken_by_the_next_kid_that_ends(self, store: Store) -> None:
        if isinstance(store, RedisStore) and store.keys.clustered:
            return  # nothing is gathered on a cluster (see above)
        kid = self.created(store, snapshot("p.1.0"))
        assert store.release_ended("p", 1, []) == 0
        wake = Send(QUEUE, "wake", "tag-wake", gather=Gather("p", 1, "p.1.0"))
        self.commit(store, kid, moved(kid, status=RunStatus.COMPLETED), sends=[wake])
        sent = self.queued(store, QUEUE) if store.direct else [s.body for s in store.outbox("p.1.0")]
        assert sent == ["wake"] and store.ended("p", 1) == ["p.1.0"]

    def test_create_runs_and_load_runs_do_many_at_once(self, store: Store) -> None:
        runs = [snapshot(f"run-{i}", state={"n": i}) for i in range(3)]
        assert store.create_runs([(s, "fp", (), None) for s in runs[:2]]) == [Created(True)] * 2
        assert store.create_runs([(s, "fp", (), None) for s in runs]) == [
            Created(False, "fp"),
            Created(False, "fp"),
            Created(True),
        ]
        loaded = store.load_runs(["run-2", "nope", "run-0"])
        assert loaded == [store.load_run("run-2"), None, store.load_run("run-0")]
        assert loaded[0] is not None and loaded[0].state == {"n": 2}

    def test_dead_letters_are_counted_and_kept_newest_first(self, store: Store) -> None:
        assert store.dead_total() == 0 and store.dead_letters() == []
        letters = [
            DeadLetter(f"bad {i}", "graphrunner.step", QUEUE, T0 + i, f"body {i}", {"task": "x", "n": i})
            for i in range(5)
        ]
        assert [store.dead_letter(letter, keep=3) for letter in letters] == [1, 2, 3, 4, 5]
        assert store.dead_total() == 5
        assert store.dead_letters() == letters[:1:-1]
        assert store.dead_letters(count=2) == [letters[4], letters[3]]
        assert store.dead_letters(count=0) == []
        anonymous = DeadLetter("not JSON", None, None, T0, "")
        store.dead_letter(anonymous)
        assert store.dead_letters(1) == [anonymous]

    # -- foreach items -----------------------------------------------------------------------------

    def test_the_first_record_of_an_item_wins(self, store: Store) -> None:
        self.created(store, snapshot())
        assert store.save_item("run-1", "1.1.x", 2, {"ok": True, "result": "first"}) is True
        assert store.save_item("run-1", "1.1.x", 2, {"ok": False, "error": "second"}) is False
        assert store.save_item("run-1", "1.1.x", 0, {"ok": True, "result": [1, 2]}) is True
        assert store.save_item("run-1", "1.1.y", 0, {"ok": True, "result": "other tag"}) is True
        assert store.count_items("run-1", "1.1.x") == 2
        assert list(store.item_records("run-1", "1.1.x", 4)) == [
            {"ok": True, "result": [1, 2]},
            None,
            {"ok": True, "result": "first"},
            None,
        ]
        assert store.missing_items("run-1", "1.1.x", 0, 4) == [1, 3]
        assert store.missing_items("run-1", "1.1.x", 2, 3) == []
        store.drop_items("run-1", "1.1.x")
        assert store.count_items("run-1", "1.1.x") == 0
        assert list(store.item_records("run-1", "1.1.x", 2)) == [None, None]
        assert store.count_items("run-1", "1.1.y") == 1

    def test_many_items_load_in_order(self, store: Store) -> None:
        for index in range(0, 2500, 2):
            store.save_item("run-1", "t", index, {"ok": True, "result": index})
        loaded = list(store.item_records("run-1", "t", 2500))
        assert [r["result"] if r else None for r in loaded] == [
            i if i % 2 == 0 else None for i in range(2500)
        ]
        assert store.missing_items("run-1", "t", 995, 1005) == [995, 997, 999, 1001, 1003]

    def test_exactly_one_save_completes_a_chunk_whatever_comes_twice(self, store: Store) -> None:
        self.created(store, snapshot())
        done = {"ok": True, "result": 1}
        assert store.save_items("run-1", "t", [(0, done), (1, done)], upto=4) == Saved(2, False)
        assert store.save_items("run-1", "t", [(1, done), (2, done)], upto=4) == Saved(1, False)
        assert store.save_items("run-1", "t", [(3, done)], upto=4) == Saved(1, True)  # the 4th record
        for again in ([(3, done)], [(0, done), (3, done)]):  # a redelivered item never completes it again
            assert store.save_items("run-1", "t", again, upto=4) == Saved(0, False)
        assert store.save_items("run-1", "t", [(4, done), (5, done)], upto=6) == Saved(
            2, True
        )  # the next chunk
        assert store.save_items("run-1", "t", [(6, done)]) == Saved(1, False)  # upto 0: no chunk waits
        assert store.count_items("run-1", "t") == 7

    def test_item_records_are_read_in_item_order_one_at_a_time(self, store: Store) -> None:
        for index in range(0, 2500, 2):
            store.save_item("run-1", "t", index, {"ok": True, "result": index})
        records = store.item_records("run-1", "t", 2500)
        assert next(records) == {"ok": True, "result": 0} and next(records) is None
        rest = [r["result"] if r else None for r in records]
        assert rest == [i if i % 2 == 0 else None for i in range(2, 2500)]

    def test_an_item_is_progress_for_its_run(self, store: Store) -> None:
        now = time.time()
        assert store.create_run(snapshot("watched"), "fp", progress=now - 10).created
        assert store.create_run(snapshot("ahead"), "fp", progress=now + 3600).created
        self.created(store, snapshot("unwatched"))
        store.save_item("watched", "t", 0, {"ok": True}, progress=now + 600)
        store.save_item("ahead", "t", 0, {"ok": True}, progress=now + 600)
        store.save_item("unwatched", "t", 0, {"ok": True}, progress=now - 600)
        assert store.stalled(now) == []
        assert store.stalled(now + 1200) == ["watched"]  # never moved back
        assert store.stalled(now + 7200) == ["watched", "ahead"]
        assert "heartbeat" in store.activity(["watched"])[0]

    # -- the result cache ----------------------------------------------------------------------------

    def test_the_cache_keeps_a_value_until_its_ttl(self, store: Store) -> None:
        assert store.cache_get("d1") == (False, None)
        store.cache_set("d1", {"text": "hi", "n": [1, 2]}, ttl=3600)
        store.cache_set("d2", None, ttl=3600)
        assert store.cache_get("d1") == (True, {"text": "hi", "n": [1, 2]})
        assert store.cache_get("d2") == (True, None)
        store.cache_set("short", "gone soon", ttl=1)
        wait_until(lambda: store.cache_get("short") == (False, None), "the cached value to expire")
        assert store.cache_get("d1")[0] is True

    # -- concurrency keys ------------------------------------------------------------------------------

    def test_a_concurrency_key_is_held_queued_for_and_handed_on(self, store: Store) -> None:
        assert store.key_holder("k") is None
        assert store.acquire_key("k", "a", queue=True) == ("acquired", None)
        assert store.acquire_key("k", "a", queue=False) == ("acquired", None)  # its holder again
        assert store.acquire_key("k", "b", queue=False) == ("refused", "a")
        assert store.acquire_key("k", "b", queue=True) == ("queued", "a")
        assert store.acquire_key("k", "b", queue=True) == ("queued", "a")  # queued once
        assert store.acquire_key("k", "c", queue=True) == ("queued", "a")
        assert store.acquire_key("k", "d", queue=True) == ("queued", "a")
        assert store.acquire_key("other", "x", queue=False) == ("acquired", None)
        assert store.release_key("k", "b") is None and store.key_holder("k") == "a"  # not its holder
        store.unqueue("k", "c")
        assert store.release_key("k", "a") == "b" and store.key_holder("k") == "b"
        assert store.release_key("k", "b") == "d" and store.key_holder("k") == "d"
        assert store.release_key("k", "d") is None and store.key_holder("k") is None
        assert store.acquire_key("k", "e", queue=False) == ("acquired", None)
        assert store.key_holder("other") == "x"

    # -- liveness --------------------------------------------------------------------------------------

    def test_beat_pushes_the_deadline_of_watched_runs_only(self, store: Store) -> None:
        now = time.time()
        assert store.create_run(snapshot("late"), "fp", progress=now - 10).created
        assert store.create_run(snapshot("ahead"), "fp", progress=now + 3600).created
        self.created(store, snapshot("unwatched"))
        store.beat(["late", "ahead", "unwatched"], progress=now + 600)
        assert store.stalled(now) == []
        assert store.stalled(now + 1200) == ["late"]
        assert store.stalled(now + 7200) == ["late", "ahead"]
        for row in store.activity(["late", "ahead", "unwatched"]):
            assert now_ms() - int(row["heartbeat"]) < 60_000
        store.beat(["late"])  # no progress given: the deadline becomes now, never earlier
        assert store.stalled(now + 1200) == ["late"]
        store.beat([])

    def test_beat_never_creates_a_run(self, make_store: StoreFactory) -> None:
        store = make_store(retention_seconds=1)
        first = self.created(store, snapshot("done"))
        self.commit(store, first, moved(first, status=RunStatus.COMPLETED))
        wait_until(lambda: store.load_run("done") is None, "the finished run to expire")
        store.beat(["done", "ghost"], progress=time.time() + 60)
        assert store.run_fields("done") == {} and store.run_fields("ghost") == {}
        assert store.activity(["done", "ghost"]) == [{}, {}]
        assert store.stalled(time.time() + 3600) == []
        assert store.create_run(snapshot("done"), "fp-new").created

    def test_stalled_lists_runs_past_their_deadline_earliest_first(self, store: Store) -> None:
        now = time.time()
        for run_id, offset in (("a", -30), ("b", -10), ("c", -20), ("d", 600), ("e", -20)):
            assert store.create_run(snapshot(run_id), "fp", progress=now + offset).created
        assert store.stalled(now) == ["a", "c", "e", "b"]
        assert store.stalled(now, limit=2) == ["a", "c"]
        assert store.stalled(now - 25) == ["a"]

    def test_touch_sets_the_deadline_of_a_watched_run(self, store: Store) -> None:
        now = time.time()
        assert store.create_run(snapshot("watched"), "fp", progress=now + 3600).created
        self.created(store, snapshot("unwatched"))
        store.touch("watched", now - 1)  # earlier too
        store.touch("unwatched", now - 1)
        store.touch("ghost", now - 1)
        assert store.stalled(now) == ["watched"]
        store.touch("watched", now + 60)
        assert store.stalled(now) == []

    def test_activity_reads_status_step_phase_and_times(self, store: Store) -> None:
        first = self.created(store, snapshot("a"))
        self.commit(store, first, moved(first, phase=2))
        self.created(store, snapshot("b"))
        rows = store.activity(["a", "ghost", "b"])
        assert [{k: r.get(k) for k in ("status", "step", "phase")} for r in rows] == [
            {"status": "running", "step": "1", "phase": "2"},
            {"status": None, "step": None, "phase": None},
            {"status": "running", "step": "0", "phase": "0"},
        ]
        assert "heartbeat" not in rows[0] and int(rows[0]["updated_at"]) <= now_ms()
        assert store.activity([]) == []

    def test_the_sweep_lock_is_held_by_one_pass(self, store: Store) -> None:
        assert store.lock_sweep(60) is True
        assert store.lock_sweep(60) is False
        store.unlock_sweep()
        assert store.lock_sweep(60) is True
        store.unlock_sweep()

    # -- listing -------------------------------------------------------------------------------------

    def create_at(self, store: Store, monkeypatch: pytest.MonkeyPatch, ms: int, *snaps: RunSnapshot) -> None:
        """Create `snaps` as if at `ms`."""
        self.freeze_clock(monkeypatch, ms)
        for snap in snaps:
            self.created(store, snap)

    def test_list_runs_filters_newest_first(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.create_at(store, monkeypatch, T0 + 1, snapshot("a1", "g/a"))
        self.create_at(store, monkeypatch, T0 + 2, snapshot("b1", "g/b"))
        self.create_at(store, monkeypatch, T0 + 3, snapshot("a2", "g/a"))
        a1 = snapshot("a1", "g/a")
        self.commit(store, a1, moved(a1, status=RunStatus.COMPLETED))
        assert ids(store.list_runs()) == ["a2", "b1", "a1"]
        assert ids(store.list_runs(graph_id="g/a")) == ["a2", "a1"]
        assert ids(store.list_runs(status="running")) == ["a2", "b1"]
        assert ids(store.list_runs(graph_id="g/a", status="completed")) == ["a1"]
        assert ids(store.list_runs(graph_id="g/none")) == []
        assert ids(store.list_runs(limit=1, offset=1)) == ["b1"]
        [a1_row] = store.list_runs(status="completed")
        assert a1_row == RunSummary("a1", "g/a", "completed", 1, T0 + 1, T0 + 3)

    def test_page_runs_filters_by_creation_time(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        for i in range(5):
            self.create_at(store, monkeypatch, T0 + 10 * i, snapshot(f"r{i}", "g/a" if i % 2 else "g/b"))
        window = store.page_runs(RunQuery.build(since=T0 + 10, until=T0 + 40))
        assert ids(window.runs) == ["r3", "r2", "r1"] and window.next_cursor is None
        assert ids(store.page_runs(RunQuery.build(since=T0 + 11)).runs) == ["r4", "r3", "r2"]
        assert ids(store.page_runs(RunQuery.build(until=T0 + 10)).runs) == ["r0"]
        assert ids(store.page_runs(RunQuery.build("g/a", since=T0 + 10, until=T0 + 11)).runs) == ["r1"]

    def test_cursor_pages_return_every_run_once_ties_included(
        self, store: Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        groups = {T0 + 1: range(0, 7), T0 + 2: range(7, 19), T0 + 3: range(19, 25)}  # same-ms runs
        for ms, members in groups.items():
            snaps = [snapshot(f"run-{i:02d}", "g/a" if i % 3 else "g/b") for i in members]
            self.create_at(store, monkeypatch, ms, *snaps)
        for i in range(0, 25, 4):
            done = snapshot(f"run-{i:02d}", "g/a" if i % 3 else "g/b")
            self.commit(store, done, moved(done, status=RunStatus.FAILED))
        everything = sorted(store.list_runs(limit=100), key=lambda r: (r.created_at, r.run_id), reverse=True)
        assert ids(store.list_runs(limit=100)) == ids(everything) and len(everything) == 25
        for limit in (1, 4, 5, 7, 12, 24, 25, 30):
            assert ids(self.walk(store, limit)) == ids(everything)
        for graph_id, status in (("g/a", None), (None, "failed"), ("g/b", "running")):
            expected = [
                r for r in everything if graph_id in (None, r.graph_id) and status in (None, r.status)
            ]
            assert ids(self.walk(store, 3, graph_id=graph_id, status=status)) == ids(expected)
        first = store.page_runs(RunQuery.build(limit=3, offset=5))  # an offset inside a tie, then cursors
        assert ids(list(first.runs) + self.walk(store, 4, cursor=first.next_cursor)) == ids(everything[5:])

    def test_runs_created_between_pages_shift_nothing(
        self, store: Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        self.create_at(store, monkeypatch, T0 + 1, *(snapshot(f"old-{i:02d}") for i in range(9)))
        before = store.list_runs(limit=100)
        first = store.page_runs(RunQuery.build(limit=4))
        assert first.next_cursor is not None
        self.create_at(store, monkeypatch, T0 + 2, *(snapshot(f"new-{i:02d}") for i in range(5)))
        rest = self.walk(store, 4, cursor=first.next_cursor)
        assert ids(list(first.runs) + rest) == ids(before)

    def test_the_last_page_has_no_cursor(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.create_at(store, monkeypatch, T0, *(snapshot(f"r{i}") for i in range(3)))
        assert store.page_runs(RunQuery.build(limit=3)).next_cursor is None
        assert store.page_runs(RunQuery.build(limit=2)).next_cursor is not None
        assert store.page_runs(RunQuery.build(graph_id="g/none")) == RunPage(())

    def walk(self, store: Store, limit: int, cursor: str | None = "", **filters: Any) -> list[RunSummary]:
        """Every run of `filters`, page by page from `cursor` ("": the first page)."""
        found: list[RunSummary] = []
        while cursor is not None:
            query = RunQuery.build(limit=limit, cursor=cursor or None, **filters)
            page = store.page_runs(query)
            assert len(page.runs) <= limit
            found, cursor = found + list(page.runs), page.next_cursor
        return found

    # -- the connection ------------------------------------------------------------------------------

    def test_ping_answers(self, store: Store) -> None:
        store.ping()


class RedisStoreContract(StoreContract):
    """The contract on a `RedisStore` (one Redis or a Redis Cluster): what a Redis subclass shares."""

    def queued(self, store: Store, queue: str) -> list[str]:
        assert isinstance(store, RedisStore)
        return list(store.redis.lrange(queue, 0, -1))

    def freeze_clock(self, monkeypatch: pytest.MonkeyPatch, ms: int) -> None:
        monkeypatch.setattr("graphrunner.store.redis_store.now_ms", lambda: ms)

    def forget_graph(self, store: Store, content_hash: str) -> None:
        assert isinstance(store, RedisStore)
        store.redis.delete(keys.graph(content_hash))
