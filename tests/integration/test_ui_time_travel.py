"""The run explorer's time travel and schedules over plain HTTP (issue 28): a run's state after a
step, forking a run after a step with a patch, and adding, pausing, resuming, triggering,
backfilling and removing a schedule; bad bodies refused with what was wrong. Runs are executed by
the session's in-thread worker. Who may do what is in test_ui_security.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from test_ui_api import HELLO, graph_file
from test_ui_server import UiServer, auth_header, unique

from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis
from graphrunner.settings import PURE_BUILTINS

WAIT = 60.0
COUNTING = """
id: {graph_id}
state: {{n: {{type: integer, default: 0}}}}
config: {{start: a}}
nodes:
  a: {{type: gate, assign: {{n: "${{state.n + 1}}"}}, next: b}}
  b: {{type: gate, assign: {{n: "${{state.n + 1}}"}}, next: c}}
  c: {{type: gate, assign: {{n: "${{state.n + 1}}"}}, next: done}}
  done: {{type: return}}
"""


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ui-time-travel-graphs")


@pytest.fixture(scope="module")
def server(redis_server: EmbeddedRedis, cluster: Client, graphs: Path) -> Iterator[UiServer]:
    with UiServer(redis_server.url, graphs, "--basic-auth", "ops:s3cret") as ui:
        yield ui


@pytest.fixture
def http(server: UiServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers=auth_header(), timeout=30) as client:
        yield client


def page_text(http: httpx.Client, path: str) -> str:
    """A page's HTML, read without keeping its XSRF cookie (a client with it must send the token)."""
    text = http.get(path).text
    http.cookies.clear()
    return text


def error_of(answer: httpx.Response) -> tuple[int, str, str]:
    error = answer.json()["error"]
    return answer.status_code, error["type"], error["message"]


def test_the_state_after_a_step_and_a_fork_with_a_patch(
    http: httpx.Client, graphs: Path, cluster: Client
) -> None:
    run = cluster.submit(str(graph_file(graphs, COUNTING, unique("ui/counting"))), capabilities=PURE_BUILTINS)
    assert run.wait(timeout=WAIT).state["n"] == 3
    assert [http.get(f"/api/runs/{run.id}/state", params={"at": s}).json()["n"] for s in range(4)] == [
        0,
        1,
        2,
        3,
    ]
    assert http.get(f"/api/runs/{run.id}/state", params={"at": 1, "key": "n"}).json() == 1
    page = page_text(http, f"/runs/{run.id}")
    assert 'class="fork-here" data-step="1"' in page and 'id="fork-box"' in page

    answer = http.post(f"/api/runs/{run.id}/fork", json={"step": 1, "state_patch": {"n": 10}})
    assert answer.status_code == 201, answer.text
    fork = cluster.run(answer.json()["run_id"])
    result = fork.wait(timeout=WAIT)
    assert result.status == "completed" and result.state["n"] == 12  # b and c ran on 10; a did not
    view = http.get(f"/api/runs/{fork.id}").json()
    assert view["forked_from"] == {"run_id": run.id, "step": 1}
    assert f'href="/runs/{run.id}"' in page_text(http, f"/runs/{fork.id}")


def test_bad_time_travel_requests_say_what_was_wrong(
    http: httpx.Client, graphs: Path, cluster: Client
) -> None:
    run = cluster.submit(str(graph_file(graphs, COUNTING, unique("ui/counting"))), capabilities=PURE_BUILTINS)
    assert run.wait(timeout=WAIT).status == "completed"
    code, kind, message = error_of(http.get(f"/api/runs/{run.id}/state", params={"at": "1; rm -rf /"}))
    assert (code, kind) == (400, "InvalidRunQuery") and "at must be a whole number" in message
    code, kind, message = error_of(http.get(f"/api/runs/{run.id}/state", params={"at": 99}))
    assert (code, kind) == (404, "HistoryUnavailable") and "99" in message
    bodies = [
        ({"step": "1"}, 400, "InvalidRunQuery"),
        ({"step": True}, 400, "InvalidRunQuery"),
        ({}, 400, "InvalidRunQuery"),
        ({"step": 1, "state_patch": ["n", 1]}, 400, "InvalidRunQuery"),
        ({"step": 1, "state_patch": {"n": "$(id)"}}, 422, "StateValidationError"),
        ({"step": 10**12}, 404, "HistoryUnavailable"),
    ]
    for body, status, kind in bodies:
        answer = http.post(f"/api/runs/{run.id}/fork", json=body)
        assert error_of(answer)[:2] == (status, kind), (body, answer.text)
    assert error_of(http.post("/api/runs/no-such-run/fork", json={"step": 1}))[:2] == (404, "RunNotFound")
    assert [r.run_id for r in cluster.list_runs(run.snapshot().graph_id)] == [run.id]  # no fork was made


def test_a_schedule_added_paused_resumed_triggered_backfilled_and_removed(
    http: httpx.Client, graphs: Path, cluster: Client
) -> None:
    graph_id = unique("ui/hello")
    graph_file(graphs, HELLO, graph_id)
    body = {"graph": graph_id, "name": "hourly", "cron": "0 * * * *", "inputs": {"name": "sched"}}
    added = http.post("/api/schedules", json=body | {"paused": True, "overlap": "allow_all"})
    assert added.status_code == 201, added.text
    sid = added.json()["id"]
    url = f"/api/schedules/{quote(sid, safe='')}"
    try:
        assert sid == f"{graph_id}/hourly" and added.json()["paused"] is True
        assert added.json()["capabilities"] == list(PURE_BUILTINS)  # the login's
        assert sid in [s["id"] for s in http.get("/api/schedules").json()["schedules"]]
        resumed = http.post(url + "/resume", json={})
        assert resumed.status_code == 200 and resumed.json()["next_fires"], resumed.text
        assert http.post(url + "/pause", json={}).json()["paused"] is True

        triggered = http.post(url + "/trigger", json={})
        assert triggered.status_code == 200, triggered.text
        run = cluster.run(triggered.json()["run_id"])
        assert run.wait(timeout=WAIT).state["greeting"] == "Hello, sched!"
        assert http.get(f"/api/runs/{run.id}").json()["schedule"]["id"] == sid

        window = {"start": "2026-01-01T00:00:00", "end": "2026-01-01T02:00:00"}
        backfilled = http.post(url + "/backfill", json=window)
        assert backfilled.status_code == 200, backfilled.text
        ticks = backfilled.json()["ticks"]
        assert [t["outcome"] for t in ticks] == ["fired", "fired"]
        for tick in ticks:
            assert cluster.run(tick["run_id"]).wait(timeout=WAIT).status == "completed"
        again = http.post(url + "/backfill", json=window).json()["ticks"]
        assert [t["run_id"] for t in again] == [t["run_id"] for t in ticks]  # a tick starts one run
        listed = http.get("/api/runs", params={"schedule": sid}).json()["runs"]
        assert {t["run_id"] for t in ticks} <= {r["run_id"] for r in listed}
        assert sid in page_text(http, "/schedules")
    finally:
        http.post(url + "/remove", json={})
    assert error_of(http.get(url))[:2] == (404, "ScheduleNotFound")


def test_bad_schedule_requests_say_what_was_wrong(http: httpx.Client, graphs: Path) -> None:
    graph_id = unique("ui/hello")
    graph_file(graphs, HELLO, graph_id)
    base = {"graph": graph_id, "name": "n", "inputs": {"name": "x"}}
    bad = [
        ({**base, "cron": "61 * * * *"}, 422, "cron"),
        ({**base, "cron": "0 * * * *", "timezone": "Mars/Olympus_Mons"}, 422, "timezone"),
        ({**base, "cron": "0 * * * *", "every": "1h"}, 422, "cron"),
        ({**base, "every": "-5m"}, 422, "every"),
        ({**base, "cron": "0 * * * *", "overlap": "sometimes"}, 422, "overlap"),
        ({**base, "cron": "0 * * * *", "name": "a/b; rm -rf /"}, 422, "name"),
        ({**base, "cron": "0 * * * *", "colour": "red"}, 400, "colour"),
        ({**base, "cron": "0 * * * *", "inputs": {}}, 422, "name"),  # HELLO requires the input
        ({**base, "cron": "0 * * * *", "graph": "../etc/passwd"}, 404, "graph"),
    ]
    for body, status, named in bad:
        answer = http.post("/api/schedules", json=body)
        code, _kind, message = error_of(answer)
        assert code == status and named in message, (body, answer.text)
    assert all(not s["id"].startswith(graph_id) for s in http.get("/api/schedules").json()["schedules"])
    unknown = http.post(f"/api/schedules/{quote('no/such', safe='')}/trigger", json={})
    assert error_of(unknown)[:2] == (404, "ScheduleNotFound")
    assert http.post("/api/schedules/x%2Fy/explode", json={}).status_code == 404
