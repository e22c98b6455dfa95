"""The explorer shows time (issue 26), over plain HTTP: a run's timeline (`/api/runs/<id>/timeline`),
a graph's per-node stats over a window (`/api/graph-stats/<id>`), both capped and behind the same
login as everything else, and the run's trace link (GRAPHRUNNER_TRACE_URL).

Runs are real runs of the session's worker where what they record is enough; where a field the
cluster may not fill yet is needed (`begun_at`, `items`, a trace), the run is created in the
store and its records appended as a worker's would be (`stored_run`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from click.testing import CliRunner
from test_ui_api import graph_file
from test_ui_server import UiServer, auth_header, unique

from graphrunner import parse_graph
from graphrunner.cli import main
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis
from graphrunner.engine import RunSnapshot, RunStatus, TraceLink
from graphrunner.engine.failures import RunFailure
from graphrunner.services.records import AnyRecord, RetryRecord, StepRecord
from graphrunner.services.timings import ItemTime, ItemTimes

WAIT = 60.0
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACE_URL = "http://127.0.0.1:16686/trace/{trace_id}?run={run_id}"
T0 = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)
RETRYING = """
id: {graph_id}
config: {{start: a}}
nodes:
  a: {{action: {{tool: echo, params: {{x: 1}}}}, next: flaky}}
  flaky:
    action: {{tool: fail, params: {{message: "not yet", transient: true}}}}
    retry: {{max_attempts: 2, initial: 0.2, jitter: 0}}
    error_mode: continue
    next: done
  done: {{type: return}}
"""
WORK = """
id: {graph_id}
config: {{start: work}}
nodes:
  work: {{action: {{tool: echo}}, next: done}}
  done: {{type: return}}
"""


def at(ms: float) -> str:
    return (T0 + timedelta(milliseconds=ms)).isoformat()


def step(number: int, node: str, start: float, ms: float, status: str = "ok", **extra: Any) -> StepRecord:
    """A step record as a worker writes it, started `start` ms after T0."""
    error = (
        RunFailure(type="permanent", message="boom", error_type="ValueError") if status == "error" else None
    )
    extra.setdefault("worker", "worker-1:42")
    return StepRecord(
        step=number, node=node, status=status, error=error, started_at=at(start), duration_ms=ms, **extra
    )


def retry(number: int, node: str, when: float, delay_s: float) -> RetryRecord:
    failure = RunFailure(type="transient", message="flaky", error_type="ConnectionError")
    return RetryRecord(
        step=number,
        node=node,
        attempts=1,
        error=failure,
        retry_in_s=delay_s,
        at=at(when),
        worker="worker-1:42",
    )


def items(count: int, failed: Sequence[int] = ()) -> ItemTimes:
    """`count` foreach items, 10 ms apart, item i taking 10 + i ms, those in `failed` failed."""
    start = int(T0.timestamp() * 1000) + 100
    return ItemTimes.of(
        [
            ItemTime(i=i, at=start + 10 * i, ms=10.0 + i, ok=i not in failed, worker=f"w{i % 2}")
            for i in range(count)
        ]
    )


def fan_out_records() -> list[AnyRecord]:
    """A run of three steps: `prepare`, then `fan` (a foreach of 5 items, item 3 failed, that
    waited for them: suspended), then `flaky` (a retry backoff first)."""
    return [
        step(1, "prepare", 0, 20, queue_ms=12.0),
        step(
            2, "fan", 400, 30, queue_ms=40.0, begun_at=at(50), items=items(5, failed=[3]), worker="worker-2:7"
        ),
        retry(3, "flaky", 450, 1.5),
        step(3, "flaky", 2000, 25, status="error", queue_ms=3.0, begun_at=at(440)),
    ]


def stored_run(
    client: Client,
    graph_id: str,
    records: Sequence[AnyRecord],
    *,
    trace: TraceLink | None = None,
    graph_hash: str = "",
    run_id: str | None = None,
) -> str:
    """A finished run created in the store with `records` appended to its transcript, as a worker's."""
    run_id = run_id or unique("tl")
    snap = RunSnapshot(
        run_id=run_id,
        graph_id=graph_id,
        graph_hash=graph_hash,
        status=RunStatus.COMPLETED,
        step=max((r.step for r in records), default=0),
        trace=trace,
    )
    assert client.store.create_run(snap, "test-fingerprint").created
    for record in records:
        client.store.note(run_id, record.to_json())
    return run_id


def backdate(redis_url: str, client: Client, run_id: str, graph_id: str, hours: float) -> None:
    """Make run `run_id` look created `hours` ago in the run indexes (what a window reads)."""
    shard = client.store.keys.shard(run_id)  # type: ignore[attr-defined]
    score = int((datetime.now(UTC) - timedelta(hours=hours)).timestamp() * 1000)
    status = "completed"
    indexes = (
        shard.index_all(),
        shard.index_graph(graph_id),
        shard.index_status(status),
        shard.index_graph_status(graph_id, status),
    )
    with redis.Redis.from_url(redis_url) as db:
        for key in indexes:
            assert db.zadd(key, {run_id: score}, xx=True, ch=True) == 1, key


def work_graph(client: Client, graphs: Path, graph_id: str) -> str:
    """Store a version of graph `graph_id` (as a submit would) and return its content hash."""
    graph = parse_graph(graph_file(graphs, WORK, graph_id).read_text(encoding="utf-8"), file="work.yaml")
    client.cluster.graphs.put(graph)
    return graph.content_hash


def stats_runs(client: Client, graphs: Path, redis_url: str) -> str:
    """A new graph's id, with two runs of it stored: one within the last hour (three steps of
    `work` ok, a retry, a fourth in error), one of three hours ago (one step in error)."""
    graph_id = unique("ui/stats")
    content_hash = work_graph(client, graphs, graph_id)
    recent = [step(1, "work", 0, ms) for ms in (10, 20, 30)] + [
        retry(4, "work", 0, 1),
        step(4, "work", 0, 40, "error"),
    ]
    stored_run(client, graph_id, recent, graph_hash=content_hash)
    older = stored_run(client, graph_id, [step(1, "work", 0, 1000, "error")], graph_hash=content_hash)
    backdate(redis_url, client, older, graph_id, hours=3)
    return graph_id


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ui-timeline-graphs")


@pytest.fixture(scope="module")
def server(redis_server: EmbeddedRedis, cluster: Client, graphs: Path) -> Iterator[UiServer]:
    env = {"GRAPHRUNNER_TRACE_URL": TRACE_URL}
    with UiServer(redis_server.url, graphs, "--basic-auth", "ops:s3cret", env=env) as ui:
        yield ui


@pytest.fixture
def http(server: UiServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers=auth_header(), timeout=30) as client:
        yield client


def test_the_timeline_of_a_run_the_cluster_took(http: httpx.Client, graphs: Path, cluster: Client) -> None:
    run = cluster.submit(str(graph_file(graphs, RETRYING, unique("ui/retrying"))))
    assert run.wait(timeout=WAIT).status == "completed_with_errors"
    answer = http.get(f"/api/runs/{run.id}/timeline")
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert [(r["step"], r["node"], r["status"]) for r in data["rows"]] == [
        (1, "a", "ok"),
        (2, "flaky", "error"),
        (3, "done", "end"),
    ]
    assert all(r["worker"] and r["start_ms"] and r["duration_ms"] is not None for r in data["rows"])
    [mark] = data["rows"][1]["marks"]
    assert (mark["kind"], mark["ms"], mark["error"]["type"]) == ("retry", 200.0, "transient")
    assert data["rows"][1]["error"]["message"] == "not yet"
    assert data["start_ms"] <= data["rows"][0]["start_ms"] <= data["end_ms"]
    assert (data["records"], data["more"], data["next_after"], data["run_id"]) == (4, False, None, run.id)


def test_suspension_queue_wait_and_foreach_items(http: httpx.Client, cluster: Client) -> None:
    run_id = stored_run(cluster, unique("ui/fan"), fan_out_records())
    prepare, fan, flaky = http.get(f"/api/runs/{run_id}/timeline").json()["rows"]
    assert (prepare["queue_ms"], prepare["worker"], prepare["suspended_ms"]) == (12.0, "worker-1:42", None)
    assert (fan["begun_at"], fan["suspended_ms"], fan["worker"]) == (at(50), 400 - 50 - 40, "worker-2:7")
    shown = fan["items"]
    assert (shown["count"], shown["failed"], shown["items_omitted"]) == (5, 1, 0)
    assert [(i["i"], i["ok"]) for i in shown["items"]] == [
        (0, True),
        (1, True),
        (2, True),
        (3, False),
        (4, True),
    ]
    assert (shown["p50_ms"], shown["max_ms"]) == (12.0, 14.0)
    assert flaky["marks"][0]["kind"] == "retry" and flaky["marks"][0]["ms"] == 1500.0
    assert not flaky["marks"][0]["within"] and flaky["suspended_ms"] == 2000 - 440 - 3


def test_the_timeline_reads_a_window_of_the_transcript(http: httpx.Client, cluster: Client) -> None:
    records = [step(i, f"n{i}", 10 * i, 5) for i in range(1, 26)]
    run_id = stored_run(cluster, unique("ui/long"), records)
    first = http.get(f"/api/runs/{run_id}/timeline", params={"limit": 10}).json()
    assert [r["step"] for r in first["rows"]] == list(range(1, 11))
    assert first["more"] is True and first["records"] == 10 and first["limit"] == 10
    rest = http.get(f"/api/runs/{run_id}/timeline", params={"limit": 20, "after": first["next_after"]}).json()
    assert [r["step"] for r in rest["rows"]] == list(range(11, 26)) and rest["more"] is False
    page = http.get(f"/runs/{run_id}", params={"timeline_after": first["next_after"]})
    assert page.status_code == 200 and 'data-records="15"' in page.text
    for bad in ({"limit": 0}, {"limit": 2001}, {"limit": "x"}, {"after": "not-an-id"}, {"after": "1-0-0"}):
        answer = http.get(f"/api/runs/{run_id}/timeline", params=bad)
        assert answer.status_code == 400 and answer.json()["error"]["type"] == "InvalidRunQuery", bad
    latest = http.get(f"/api/runs/{run_id}/timeline", params={"latest": "1"}).json()
    assert latest["latest"] is True and [r["step"] for r in latest["rows"]] == list(range(1, 26))
    missing = http.get("/api/runs/no-such-run/timeline")
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "RunNotFound"


def test_the_run_page_says_what_its_timeline_left_out(http: httpx.Client, cluster: Client) -> None:
    run_id = stored_run(cluster, unique("ui/longer"), [step(i, "n", i, 1) for i in range(1, 503)])
    page = http.get(f"/runs/{run_id}").text
    assert 'data-records="500"' in page and "later ones are left out" in page
    assert f'href="/runs/{run_id}?timeline=latest#timeline"' in page
    latest = http.get(f"/runs/{run_id}", params={"timeline": "latest"})
    assert latest.status_code == 200 and "the run's latest steps" in latest.text


def test_per_node_stats_over_a_window(
    http: httpx.Client, graphs: Path, cluster: Client, redis_server: EmbeddedRedis
) -> None:
    graph_id = stats_runs(cluster, graphs, redis_server.url)
    hour = http.get(f"/api/graph-stats/{graph_id}", params={"window": "1h"}).json()
    assert (hour["runs_read"], hour["runs_capped"], hour["runs_truncated"], hour["records_read"]) == (
        1,
        False,
        0,
        5,
    )
    [work] = hour["nodes"]
    assert (work["node"], work["steps"], work["errors"], work["retries"]) == ("work", 4, 1, 1)
    assert (work["p50_ms"], work["p95_ms"], work["failure_rate"]) == (20.0, 40.0, 0.25)
    day = http.get(f"/api/graph-stats/{graph_id}").json()  # 24h by default
    assert day["window"] == "24h" and day["runs_read"] == 2
    assert (day["nodes"][0]["steps"], day["nodes"][0]["errors"], day["nodes"][0]["p95_ms"]) == (5, 2, 1000.0)
    page = http.get(f"/graphs/{graph_id}", params={"window": "1h"})
    assert page.status_code == 200 and 'data-window="1h"' in page.text and "25.0 %" in page.text
    bad = http.get(f"/api/graph-stats/{graph_id}", params={"window": "1y"})
    assert bad.status_code == 400 and "window must be one of 1h, 24h, 7d" in bad.json()["error"]["message"]
    assert http.get(f"/graphs/{graph_id}", params={"window": "1y"}).status_code == 400
    assert http.get(f"/api/graph-stats/{unique('ui/none')}").status_code == 404


def test_the_run_links_its_trace(http: httpx.Client, cluster: Client) -> None:
    run_id = stored_run(
        cluster, unique("ui/traced"), [step(1, "a", 0, 1)], trace=TraceLink(trace_id=TRACE_ID)
    )
    url = f"http://127.0.0.1:16686/trace/{TRACE_ID}?run={run_id}"
    assert http.get(f"/api/runs/{run_id}").json()["trace"] == {"trace_id": TRACE_ID, "url": url}
    page = http.get(f"/runs/{run_id}").text
    assert f'<a class="trace" href="{url}"' in page
    untraced = stored_run(cluster, unique("ui/untraced"), [step(1, "a", 0, 1)])
    assert http.get(f"/api/runs/{untraced}").json()["trace"] is None
    assert 'class="trace"' not in http.get(f"/runs/{untraced}").text


def test_what_a_record_holds_cannot_inject_markup(http: httpx.Client, cluster: Client) -> None:
    hostile = '"><script>alert(1)</script><img src=x onerror=alert(2)>'
    records = [step(1, hostile, 0, 1, worker=hostile), retry(2, hostile, 5, 0.1)]
    run_id = stored_run(cluster, unique("ui/hostile"), records)
    page = http.get(f"/runs/{run_id}").text
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert http.get(f"/api/runs/{run_id}/timeline").json()["rows"][0]["worker"] == hostile  # as data, in JSON


def test_the_timeline_and_stats_need_a_login_and_an_allowed_host(
    server: UiServer, http: httpx.Client, cluster: Client
) -> None:
    graph_id = unique("ui/private")
    run_id = stored_run(cluster, graph_id, fan_out_records())
    paths = (
        f"/api/runs/{run_id}/timeline",
        f"/api/graph-stats/{graph_id}",
        f"/runs/{run_id}",
        f"/graphs/{graph_id}",
    )
    for path in paths:
        anonymous = httpx.get(server.url + path, timeout=30)
        assert anonymous.status_code == 401 and "fan" not in anonymous.text, path
        wrong = httpx.get(server.url + path, headers=auth_header(password="wrong"), timeout=30)
        assert wrong.status_code == 401 and "fan" not in wrong.text, path
        foreign = httpx.get(server.url + path, headers={**auth_header(), "Host": "evil.example"}, timeout=30)
        assert foreign.status_code == 421 and "fan" not in foreign.text, path
        assert http.get(path).status_code == 200, path


def test_the_openapi_document_lists_the_new_endpoints(http: httpx.Client) -> None:
    paths = http.get("/api/openapi.json").json()["paths"]
    assert {"/api/runs/{run_id}/timeline", "/api/graph-stats/{graph_id}"} <= set(paths)
    window = paths["/api/graph-stats/{graph_id}"]["get"]["parameters"][1]
    assert window["schema"]["enum"] == ["1h", "24h", "7d"]


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("javascript:alert(1)//{trace_id}", "must be an http:// or https:// URL"),
        ("http://127.0.0.1:16686/search", "must contain {trace_id}"),
    ],
)
def test_the_explorer_refuses_a_trace_url_that_cannot_work(template: str, problem: str) -> None:
    env = {"GRAPHRUNNER_REDIS_URL": "redis://127.0.0.1:1/0", "GRAPHRUNNER_TRACE_URL": template}
    out = CliRunner().invoke(main, ["ui", "--no-auth"], env=env)
    assert out.exit_code == 2 and f"GRAPHRUNNER_TRACE_URL {problem}" in out.stderr
