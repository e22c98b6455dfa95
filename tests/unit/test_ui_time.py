"""The explorer's timeline and per-node stats as pure functions over transcript records, the
stats' caps over a fake client, the trace link, and GRAPHRUNNER_TRACE_URL's validation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from graphrunner.engine import RunSnapshot, TraceLink
from graphrunner.engine.failures import RunFailure
from graphrunner.services.records import (
    AnyRecord,
    CancelRecord,
    RetryRecord,
    SleepRecord,
    StepRecord,
    parse,
)
from graphrunner.services.timings import ItemTime, ItemTimes
from graphrunner.settings import Settings
from graphrunner.store import StepEntry
from graphrunner.store.query import RunPage, RunSummary
from graphrunner.ui import reading
from graphrunner.ui.node_stats import node_stats
from graphrunner.ui.timeline import MAX_ITEMS_SHOWN, duration, items_view, layout, timeline
from graphrunner.ui.views import trace_link, trace_view

T0 = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)
T0_MS = T0.timestamp() * 1000
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def at(ms: float) -> str:
    return (T0 + timedelta(milliseconds=ms)).isoformat()


def step(number: int, node: str, start: float, ms: float, status: str = "ok", **extra: Any) -> StepRecord:
    error = (
        RunFailure(type="permanent", message="boom", error_type="ValueError") if status == "error" else None
    )
    return StepRecord(
        step=number,
        node=node,
        status=status,
        error=error,
        started_at=at(start),
        duration_ms=ms,
        worker="w1",
        **extra,
    )


def retry(number: int, node: str, when: float, delay_s: float) -> RetryRecord:
    failure = RunFailure(type="transient", message="flaky", error_type="ConnectionError")
    return RetryRecord(
        step=number, node=node, attempts=1, error=failure, retry_in_s=delay_s, at=at(when), worker="w1"
    )


def entries(*records: AnyRecord) -> list[tuple[str, AnyRecord]]:
    """Records as read back (`parse` of their stored JSON), with stream ids 1 ms apart."""
    return [(f"{int(T0_MS) + i}-0", parse(r.to_json())) for i, r in enumerate(records)]


def test_a_suspended_step_shows_its_suspension_queue_wait_run_time_and_marks() -> None:
    records = entries(
        step(1, "a", 0, 10, queue_ms=5.0),
        retry(2, "b", 20, 1.0),
        step(2, "b", 1100, 30, queue_ms=50.0, begun_at=at(15)),
        SleepRecord(step=3, node="nap", sleep_s=2.0, at=at(1200), worker="w2"),
    )
    data = timeline(records)
    first, second, sleeping = data["rows"]
    assert (first["status"], first["queue_ms"], first["duration_ms"], first["worker"]) == (
        "ok",
        5.0,
        10,
        "w1",
    )
    assert first["suspended_ms"] is None and first["marks"] == [] and first["start_ms"] == T0_MS
    assert second["suspended_ms"] == pytest.approx(1100 - 15 - 50)
    [mark] = second["marks"]
    assert (mark["kind"], mark["ms"], mark["attempts"], mark["until_ms"]) == (
        "retry",
        1000.0,
        1,
        T0_MS + 1020,
    )
    assert mark["error"] == {"type": "transient", "error_type": "ConnectionError", "message": "flaky"}
    assert sleeping["status"] is None and sleeping["marks"][0]["kind"] == "sleeping"  # still asleep
    assert (data["start_ms"], data["end_ms"]) == (T0_MS - 5, T0_MS + 3200)
    assert data["records"] == 4 and data["unknown"] == 0


def test_a_retry_slept_in_the_steps_own_task_gets_no_bar_of_its_own() -> None:
    data = timeline(entries(step(1, "a", 0, 300), retry(2, "b", 500, 0.2), step(2, "b", 400, 300)))
    [mark] = data["rows"][1]["marks"]
    assert mark["within"] is True and data["end_ms"] == T0_MS + 700  # not the backoff's end, 700 + 200
    assert [b["kind"] for b in layout(data)[1]["bars"]] == ["run ok"]


def test_records_it_cannot_read_are_counted_not_shown() -> None:
    data = timeline(
        [("1-0", parse('{"status": "from-the-future", "step": 1}')), *entries(step(1, "a", 0, 1))]
    )
    assert [r["node"] for r in data["rows"]] == ["a"] and data["unknown"] == 1


def test_a_mark_without_its_own_time_is_placed_by_its_stream_id() -> None:
    cancel = CancelRecord(step=2, node="b", **{"from": "running"}, reason="operator", at="")
    [row] = timeline([(f"{int(T0_MS) + 7}-0", cancel)])["rows"]
    assert row["marks"][0]["at_ms"] == T0_MS + 7 and row["marks"][0]["from"] == "running"


def test_a_step_taken_again_after_its_record_gets_a_row_of_its_own() -> None:
    data = timeline(entries(step(1, "a", 0, 1, "error"), step(1, "a", 10, 1)))
    assert [r["status"] for r in data["rows"]] == ["error", "ok"]
    assert data["rows"][0]["error"]["error_type"] == "ValueError"


def test_foreach_items_list_the_failed_ones_first_within_the_cap() -> None:
    kept = [
        ItemTime(i=i, at=int(T0_MS) + i, ms=float(i), ok=i not in (900, 950), worker="w") for i in range(1000)
    ]
    times = ItemTimes.of(kept).model_copy(update={"count": 1500})  # 1500 ran, the first 1000 kept
    shown = items_view(times, room=10_000)
    listed = [item["i"] for item in shown["items"]]
    assert len(listed) == MAX_ITEMS_SHOWN and {900, 950} <= set(listed) and listed == sorted(listed)
    assert shown["items_omitted"] == 1500 - MAX_ITEMS_SHOWN and shown["failed"] == 2
    assert items_view(times, room=3)["items_omitted"] == 1497  # the timeline's budget is spent
    assert items_view(times, room=0)["items"] == []


def test_layout_places_bars_in_percent_of_the_span() -> None:
    items = ItemTimes.of([ItemTime(i=0, at=int(T0_MS) + 100, ms=400), ItemTime(i=1, ms=5, ok=False)])
    data = timeline(
        entries(step(1, "a", 0, 100), step(2, "fan", 900, 100, queue_ms=100.0, begun_at=at(100), items=items))
    )
    first, fan = layout(data)
    assert [(b["kind"], b["left"], b["width"]) for b in first["bars"]] == [("run ok", 0.0, 10.0)]
    assert [(b["kind"], b["left"], b["width"]) for b in fan["bars"]] == [
        ("suspended", 10.0, 70.0),
        ("queue", 80.0, 10.0),
        ("run ok", 90.0, 10.0),
    ]
    started, unknown = fan["items"]
    assert (started["bar"]["left"], started["bar"]["width"]) == (10.0, 40.0) and started["item"]["ok"]
    assert unknown["bar"] is None and not unknown["item"]["ok"]  # no start known: listed, not drawn
    assert layout(timeline([])) == []


def test_a_step_too_short_to_see_still_gets_a_bar() -> None:
    [_, short] = layout(timeline(entries(step(1, "a", 0, 100_000), step(2, "b", 100_000, 0.01))))
    assert short["bars"][0]["width"] > 0 and short["bars"][0]["left"] + short["bars"][0]["width"] <= 100


def test_node_stats_count_steps_percentiles_failures_and_retries() -> None:
    records: list[AnyRecord] = [
        step(i, "work", 0, float(ms), queue_ms=float(ms) / 10) for i, ms in enumerate(range(10, 110, 10))
    ]
    records += [step(20, "work", 0, 500, "error"), retry(21, "work", 0, 1), retry(21, "work", 0, 1)]
    records += [step(30, "done", 0, 1, "end"), parse('{"status": "from-the-future", "node": "work"}')]
    work, done = node_stats(records)
    assert (work["node"], work["steps"], work["errors"], work["retries"]) == ("work", 11, 1, 2)
    assert work["failure_rate"] == pytest.approx(1 / 11)
    assert (work["p50_ms"], work["p95_ms"], work["max_ms"]) == (60.0, 500.0, 500.0)
    assert (work["queue_p50_ms"], work["queue_p95_ms"]) == (5.0, 10.0)
    assert done == {
        "node": "done",
        "steps": 1,
        "errors": 0,
        "failure_rate": 0.0,
        "p50_ms": 1.0,
        "p95_ms": 1.0,
        "max_ms": 1.0,
        "queue_p50_ms": None,
        "queue_p95_ms": None,
        "retries": 0,
    }
    assert node_stats([retry(1, "flaky", 0, 1)])[0]["failure_rate"] is None  # retried, not yet taken


def test_durations_read_as_a_person_reads_them() -> None:
    assert [duration(ms) for ms in (None, 0.42, 12.4, 3200, 245_000, 7_380_000)] == [
        "",
        "0.4 ms",
        "12 ms",
        "3.2 s",
        "4 min 5 s",
        "2 h 3 min",
    ]


class FakeStore:
    def __init__(self, transcripts: dict[str, list[AnyRecord]]) -> None:
        self.transcripts = transcripts
        self.counts: list[int | None] = []

    def steps(self, run_id: str, after: str = "-", count: int | None = None) -> list[StepEntry]:
        self.counts.append(count)
        records = self.transcripts[run_id][:count]
        return [StepEntry(f"{i + 1}-0", r.to_dict()) for i, r in enumerate(records)]

    def graph_versions(self, graph_id: str) -> list[Any]:
        return []


class FakeClient:
    """What `reading.graph_stats` asks of a client: a page of runs, and their transcripts."""

    def __init__(self, transcripts: dict[str, list[AnyRecord]], more: bool) -> None:
        self.store = FakeStore(transcripts)
        self.more = more
        self.asked: dict[str, Any] = {}

    def list_page(self, graph_id: str, limit: int, since: int) -> RunPage:
        self.asked = {"graph_id": graph_id, "limit": limit, "since": since}
        runs = tuple(RunSummary(r, graph_id, "completed", 1, since, since) for r in self.store.transcripts)
        return RunPage(runs, "1-0" if self.more else None)


def test_graph_stats_say_what_they_read_and_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "STATS_RECORDS", 3)
    long = [step(i, "work", 0, 10) for i in range(5)]
    client = FakeClient({"r1": long, "r2": [step(1, "work", 0, 30, "error")]}, more=True)
    stats = reading.graph_stats(client, "g", "1h")  # type: ignore[arg-type]
    assert client.asked["limit"] == reading.STATS_RUNS and client.store.counts == [4, 4]
    assert (stats["window"], stats["runs_read"], stats["runs_capped"], stats["runs_truncated"]) == (
        "1h",
        2,
        True,
        1,
    )
    assert stats["records_read"] == 4 and stats["nodes"][0]["steps"] == 4 and stats["nodes"][0]["errors"] == 1
    day = reading.graph_stats(client, "g", None)  # type: ignore[arg-type]
    assert day["window"] == "24h" and day["since"] < stats["since"]


def test_graph_stats_refuse_an_unknown_window_and_an_unknown_graph() -> None:
    from graphrunner.errors import GraphNotFound, InvalidRunQuery

    with pytest.raises(InvalidRunQuery, match="window must be one of 1h, 24h, 7d"):
        reading.graph_stats(FakeClient({}, more=False), "g", "1y")  # type: ignore[arg-type]
    with pytest.raises(GraphNotFound):
        reading.graph_stats(FakeClient({}, more=False), "g", "7d")  # type: ignore[arg-type]


class Transcript:
    """A store holding one transcript whose positions are times, read forwards as a store reads."""

    def __init__(self, times_ms: list[int], created: int, updated: int) -> None:
        self.ids = [f"{ms}-{seq}" for seq, ms in enumerate(times_ms)]
        self.fields = {"created_at": str(created), "updated_at": str(updated)}
        self.reads = 0

    def run_fields(self, run_id: str) -> dict[str, str]:
        return self.fields

    def steps(self, run_id: str, after: str = "-", count: int | None = None) -> list[StepEntry]:
        self.reads += 1

        def key(text: str) -> tuple[int, int]:
            ms, seq = text.split("-")
            return int(ms), int(seq)

        kept = [i for i in self.ids if after == "-" or key(i) > key(after)]
        return [StepEntry(i, {}) for i in kept[:count]]


def latest(transcript: Transcript, limit: int) -> tuple[str, list[str]]:
    after, found = reading._latest(SimpleNamespace(store=transcript), "r", limit)  # type: ignore[arg-type]
    return after, [e.id for e in found]


def test_the_latest_window_is_the_longest_recent_stretch_within_the_limit() -> None:
    now = 10_000_000_000
    old = [now - 7_200_000 + i for i in range(30)]  # two hours before the last update
    recent = [now - 30_000 + i for i in range(5)] + [now - 500 + i for i in range(3)]
    transcript = Transcript(old + recent, created=now - 8_000_000, updated=now)
    after, found = latest(transcript, limit=10)
    assert found == transcript.ids[30:] and after == f"{now - 3_600_000 - 1}-{2**64 - 1}"
    assert transcript.reads == 6  # 1 s, 10 s, 1 min, 10 min, 1 h, then 1 day holds too many


def test_the_latest_window_of_a_dense_or_a_young_run() -> None:
    now = 10_000_000_000
    dense = Transcript([now - 900 + i for i in range(20)], created=now - 60_000, updated=now)
    after, found = latest(dense, limit=10)
    assert found == dense.ids[:11] and after != "-"  # even 1 s holds more: its first, and `more`
    young = Transcript([now - 4000 + i for i in range(4)], created=now - 5000, updated=now)
    assert latest(young, limit=10) == ("-", young.ids)  # 10 s reaches back to its creation
    assert latest(Transcript([1, 2], created=0, updated=0), limit=10)[1] == ["1-0", "2-1"]


def snapshot(trace: TraceLink | None, run_id: str = "run-1") -> RunSnapshot:
    return RunSnapshot(run_id=run_id, graph_id="g", trace=trace)


def test_the_trace_link_fills_and_escapes_the_template() -> None:
    link = TraceLink(trace_id=TRACE_ID)
    assert trace_view(snapshot(None), "http://j/trace/{trace_id}") is None
    assert trace_view(snapshot(link), None) == {"trace_id": TRACE_ID, "url": None}
    jaeger = trace_view(snapshot(link, "run.1:a"), "http://127.0.0.1:16686/trace/{trace_id}?run={run_id}")
    assert jaeger == {"trace_id": TRACE_ID, "url": f"http://127.0.0.1:16686/trace/{TRACE_ID}?run=run.1%3Aa"}
    grafana = 'https://grafana.example/explore?left={"queries":[{"query":"{trace_id}"}]}'
    assert trace_link(grafana, TRACE_ID, "r") == grafana.replace("{trace_id}", TRACE_ID)  # other braces stay
    hostile = trace_link("https://t.example/{run_id}/{trace_id}", '"><script>{trace_id}', 'x"><img src=x>')
    assert hostile == "https://t.example/x%22%3E%3Cimg%20src%3Dx%3E/%22%3E%3Cscript%3E%7Btrace_id%7D"
    assert trace_link("javascript:alert(1)//{trace_id}", TRACE_ID, "r") is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("http://127.0.0.1:16686/trace/{trace_id}", "http://127.0.0.1:16686/trace/{trace_id}"),
        ("  HTTPS://tempo.example/{trace_id}?run={run_id} ", "HTTPS://tempo.example/{trace_id}?run={run_id}"),
        ("", None),
    ],
)
def test_the_trace_url_setting(monkeypatch: pytest.MonkeyPatch, value: str, expected: str | None) -> None:
    monkeypatch.setenv("GRAPHRUNNER_TRACE_URL", value)
    assert Settings.from_env().trace_url == expected


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("http://127.0.0.1:16686/trace/", "must contain {trace_id}"),
        ("javascript:alert(1)//{trace_id}", "must be an http:// or https:// URL"),
        ("ftp://files.example/{trace_id}", "must be an http:// or https:// URL"),
        ("/trace/{trace_id}", "must be an http:// or https:// URL"),
        ("http:///{trace_id}", "must be an http:// or https:// URL"),
    ],
)
def test_a_trace_url_that_cannot_work_is_refused(
    monkeypatch: pytest.MonkeyPatch, value: str, problem: str
) -> None:
    monkeypatch.setenv("GRAPHRUNNER_TRACE_URL", value)
    with pytest.raises(
        ValueError, match=f"GRAPHRUNNER_TRACE_URL {problem}".replace("{", r"\{").replace("}", r"\}")
    ):
        Settings.from_env()
