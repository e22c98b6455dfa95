"""The run explorer's JSON API over plain HTTP: auth, cross-site refusals, errors, submit, cancel,
resume and a huge state capped; runs executed by the session's in-thread worker."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from test_ui_server import UiServer, auth_header, unique

from graphrunner import parse_graph
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis
from graphrunner.store import keys

WAIT = 60.0
PAUSING = """
id: {graph_id}
state: {{approved: {{type: boolean, default: false}}, outcome: {{type: string}}}}
config: {{start: a}}
nodes:
  a: {{action: {{tool: echo}}, next: approval}}
  approval: {{type: pause, message: "approve the order?", next: [{{to: ship, when: "state.approved"}}, {{to: done}}]}}
  ship: {{type: gate, assign: {{outcome: shipped}}, next: done}}
  done: {{type: return}}
"""
SLEEPING = """
id: {graph_id}
config: {{start: a}}
nodes:
  a: {{action: {{tool: echo}}, next: nap}}
  nap: {{action: {{tool: sleep, params: {{seconds: 600}}}}, next: done}}
  done: {{type: return}}
"""
HELLO = """
id: {graph_id}
inputs: {{name: {{type: string, required: true}}}}
state: {{greeting: {{type: string}}}}
config: {{start: greet}}
nodes:
  greet: {{action: {{tool: echo, params: {{text: "Hello, ${{inputs.name}}!"}}}}, assign: {{greeting: "${{result.text}}"}}, next: done}}
  done: {{type: return}}
"""
HUGE = """
id: {graph_id}
state: {{blob: {{type: string}}, items: {{type: list}}}}
config: {{start: hold}}
nodes:
  hold: {{type: pause, next: done}}
  done: {{type: return}}
"""


def graph_file(directory: Path, template: str, graph_id: str) -> Path:
    path = directory / f"{graph_id.replace('/', '_')}.yaml"
    path.write_text(textwrap.dedent(template.format(graph_id=graph_id)).lstrip(), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ui-graphs")


@pytest.fixture(scope="module")
def server(redis_server: EmbeddedRedis, cluster: Client, graphs: Path) -> Iterator[UiServer]:
    with UiServer(redis_server.url, graphs, "--basic-auth", "ops:s3cret") as ui:
        yield ui


@pytest.fixture
def http(server: UiServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers=auth_header(), timeout=30) as client:
        yield client


def test_every_path_needs_the_user_but_the_healthcheck(server: UiServer) -> None:
    for path in ("/", "/api/runs", "/api/openapi.json", "/runs/x", "/static/ui.css", "/api/graphs/g"):
        answer = httpx.get(server.url + path, timeout=30)
        assert answer.status_code == 401, path
        assert answer.headers["WWW-Authenticate"].startswith("Basic")
    wrong = httpx.get(server.url + "/api/runs", headers=auth_header(password="wrong"), timeout=30)
    assert wrong.status_code == 401 and wrong.json()["error"]["type"] == "Unauthorized"
    assert httpx.get(server.url + "/healthcheck", timeout=30).text == "OK"


def test_an_unknown_run_is_a_json_404(http: httpx.Client) -> None:
    for path in ("/api/runs/no-such-run", "/api/runs/no-such-run/steps", "/api/runs/no-such-run/state"):
        answer = http.get(path)
        assert answer.status_code == 404, path
        assert answer.json() == {"error": {"type": "RunNotFound", "message": "no run with id 'no-such-run'"}}
    cancel = http.post("/api/runs/no-such-run/cancel", json={})
    assert cancel.status_code == 404 and cancel.json()["error"]["type"] == "RunNotFound"
    page = http.get("/runs/no-such-run")
    assert (
        page.status_code == 404
        and "no run with id" in page.text
        and "text/html" in page.headers["Content-Type"]
    )
    bad = http.get("/api/runs/%7Bnot%20a%20run%7D")
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "InvalidRunId"
    assert http.get("/api/runs?status=sleepy").status_code == 400


def test_submit_by_graph_id_then_read_it(http: httpx.Client, graphs: Path, cluster: Client) -> None:
    graph_id = unique("ui/hello")
    graph_file(graphs, HELLO, graph_id)
    run_id = unique("ui-run")
    answer = http.post("/api/runs", json={"graph": graph_id, "inputs": {"name": "Ada"}, "run_id": run_id})
    assert answer.status_code == 201, answer.text
    assert answer.json()["run_id"] == run_id
    again = http.post("/api/runs", json={"graph": graph_id, "inputs": {"name": "Ada"}, "run_id": run_id})
    assert again.status_code == 200 and again.json()["run_id"] == run_id  # the same run, not a second one
    assert cluster.run(run_id).wait(timeout=WAIT).status == "completed"
    run = http.get(f"/api/runs/{run_id}").json()
    assert run["status"] == "completed" and run["state"]["greeting"] == "Hello, Ada!"
    assert run["path"] == ["greet", "done"] and run["graph_version_stored"] is True
    steps = http.get(f"/api/runs/{run_id}/steps").json()
    assert [s["node"] for s in steps["steps"]] == ["greet", "done"] and steps["next_after"] is None
    first = http.get(f"/api/runs/{run_id}/steps?limit=1").json()
    assert len(first["steps"]) == 1 and first["next_after"] == first["steps"][0]["id"]
    rest = http.get(f"/api/runs/{run_id}/steps", params={"after": first["next_after"]}).json()
    assert [s["node"] for s in rest["steps"]] == ["done"]
    listed = http.get("/api/runs", params={"graph": graph_id}).json()
    assert [r["run_id"] for r in listed["runs"]] == [run_id]
    graph = http.get(f"/api/graphs/{graph_id}").json()
    assert graph["versions"][0]["stored"] is True and graph["runs"][0]["run_id"] == run_id


def test_the_run_list_filters_by_graph_status_and_time_and_pages(
    http: httpx.Client, graphs: Path, cluster: Client
) -> None:
    graph_id = unique("ui/listed")
    path = str(graph_file(graphs, HELLO, graph_id))
    done = [cluster.submit(path, {"name": f"n{i}"}) for i in range(3)]
    for run in done:
        assert run.wait(timeout=WAIT).status == "completed"
    later = done[-1].snapshot()
    paused = cluster.submit(str(graph_file(graphs, PAUSING, graph_id)))  # a second version, paused
    assert paused.wait(timeout=WAIT).status == "paused"
    every = http.get("/api/runs", params={"graph": graph_id}).json()["runs"]
    assert [r["run_id"] for r in every] == [paused.id, *(r.id for r in reversed(done))]  # newest first
    by_status = http.get("/api/runs", params={"graph": graph_id, "status": "paused"}).json()["runs"]
    assert [r["run_id"] for r in by_status] == [paused.id]
    created = [r["created_at"] for r in every]
    since = http.get("/api/runs", params={"graph": graph_id, "since": str(created[1])}).json()["runs"]
    assert {r["run_id"] for r in since} == {r["run_id"] for r in every if r["created_at"] >= created[1]}
    assert later.run_id in {r["run_id"] for r in since}
    pages, cursor = [], None
    while True:
        params = {"graph": graph_id, "limit": "1", **({"cursor": cursor} if cursor else {})}
        page = http.get("/api/runs", params=params).json()
        pages += [r["run_id"] for r in page["runs"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert pages == [r["run_id"] for r in every]
    assert http.get("/api/runs", params={"since": "yesterday"}).status_code == 400


def test_submit_refusals_change_nothing(http: httpx.Client, graphs: Path) -> None:
    missing = http.post("/api/runs", json={"graph": "ui/no-such-graph", "inputs": {}})
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "GraphNotFound"
    escape = http.post("/api/runs", json={"graph": "../../etc/passwd"})
    assert escape.status_code == 404
    too_long = http.post("/api/runs", json={"graph": "g" * 5000})  # no file can have that name
    assert too_long.status_code == 404 and too_long.json()["error"]["type"] == "GraphNotFound"
    graph_id = unique("ui/hello")
    graph_file(graphs, HELLO, graph_id)
    invalid = http.post("/api/runs", json={"graph": graph_id, "inputs": {}})  # `name` is required
    assert invalid.status_code in (400, 422), invalid.text
    not_json = http.post(
        "/api/runs", content=b"graph=x", headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert not_json.status_code == 415
    assert http.get("/api/runs", params={"graph": graph_id}).json()["runs"] == []


def test_a_concurrency_key_queues_the_second_run_with_202(
    http: httpx.Client, graphs: Path, cluster: Client
) -> None:
    graph_id = unique("ui/pausing")
    graph_file(graphs, PAUSING, graph_id)
    key = unique("key")
    first = http.post("/api/runs", json={"graph": graph_id, "concurrency_key": key})
    assert first.status_code == 201
    second = http.post("/api/runs", json={"graph": graph_id, "concurrency_key": key})
    assert second.status_code == 202 and second.json()["status"] == "pending"
    cluster.cancel(second.json()["run_id"])
    cluster.cancel(first.json()["run_id"])


def test_cancel_and_resume_through_the_api(http: httpx.Client, graphs: Path, cluster: Client) -> None:
    sleeping = cluster.submit(str(graph_file(graphs, SLEEPING, unique("ui/sleeping"))))
    answer = http.post(f"/api/runs/{sleeping.id}/cancel", json={})
    assert answer.status_code == 200 and answer.json()["run_id"] == sleeping.id
    assert sleeping.wait(timeout=WAIT).status == "cancelled"
    again = http.post(f"/api/runs/{sleeping.id}/cancel", json={})
    assert again.status_code == 409 and again.json()["error"]["type"] == "CancelError"

    # resuming needs a login granted what the run carries: `ops` has the pure built-ins
    pausing = str(graph_file(graphs, PAUSING, unique("ui/pausing")))
    paused = cluster.submit(pausing, capabilities=["tool:echo"])
    assert paused.wait(timeout=WAIT).status == "paused"
    assert http.get(f"/api/runs/{paused.id}").json()["message"] == "approve the order?"
    bad = http.post(f"/api/runs/{paused.id}/resume", json={"state_patch": {"approved": "not a boolean"}})
    assert bad.status_code == 422 and paused.status() == "paused"
    resumed = http.post(f"/api/runs/{paused.id}/resume", json={"state_patch": {"approved": True}})
    assert resumed.status_code == 200, resumed.text
    result = paused.wait(timeout=WAIT)
    assert result.status == "completed" and result.state["outcome"] == "shipped"


def test_cross_site_actions_are_refused_and_change_nothing(
    server: UiServer, graphs: Path, cluster: Client
) -> None:
    run = cluster.submit(str(graph_file(graphs, PAUSING, unique("ui/pausing"))))
    assert run.wait(timeout=WAIT).status == "paused"
    url = f"{server.url}/api/runs/{run.id}/cancel"
    refused = [
        # a form posted from another site, credentials and cookies attached by the browser
        {"Origin": "https://evil.example", "Content-Type": "application/json"},
        {"Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"},
        {"Referer": "https://evil.example/page", "Content-Type": "application/json"},
        # the page's own origin, with a cookie but without the token
        {"Origin": server.url, "Cookie": "_xsrf=2|abc|def|1", "Content-Type": "application/json"},
        {"Origin": server.url, "Content-Type": "text/plain"},
        # an empty form, even without an Origin
        {"Content-Type": "application/x-www-form-urlencoded"},
    ]
    for headers in refused:
        body = b"" if "x-www-form" in headers["Content-Type"] else b"{}"
        answer = httpx.post(url, headers=auth_header() | headers, content=body, timeout=30)
        assert answer.status_code in (403, 415), headers
        assert "error" in answer.json()
    assert run.status() == "paused"
    unauthenticated = httpx.post(url, json={}, timeout=30)
    assert unauthenticated.status_code == 401 and run.status() == "paused"
    cluster.cancel(run.id)


def test_the_page_token_lets_the_page_act(server: UiServer, graphs: Path, cluster: Client) -> None:
    run = cluster.submit(str(graph_file(graphs, PAUSING, unique("ui/pausing"))))
    assert run.wait(timeout=WAIT).status == "paused"
    with httpx.Client(base_url=server.url, headers=auth_header(), timeout=30) as browser:
        browser.get(f"/runs/{run.id}")  # sets the _xsrf cookie
        token = browser.cookies["_xsrf"]
        headers = {"Origin": server.url, "X-XSRFToken": token}
        answer = browser.post(f"/api/runs/{run.id}/cancel", json={}, headers=headers)
        assert answer.status_code == 200, answer.text
    assert run.wait(timeout=WAIT).status == "cancelled"


def test_a_huge_state_is_capped(http: httpx.Client, graphs: Path, cluster: Client) -> None:
    graph = parse_graph(textwrap.dedent(HUGE.format(graph_id=unique("ui/huge"))), file="huge.yaml")
    blob = "x" * 600_000
    run = cluster.submit(graph, state={"blob": blob, "items": list(range(20_000))})
    assert run.wait(timeout=WAIT).status == "paused"
    answer = http.get(f"/api/runs/{run.id}")
    assert answer.status_code == 200 and len(answer.content) < 20_000
    shown = answer.json()
    assert shown["state"]["blob"]["$truncated"] is True and shown["state"]["blob"]["chars"] == len(blob) + 2
    assert shown["state_cap"]["values_truncated"] == ["blob", "items"]
    assert http.get(f"/api/runs/{run.id}/state", params={"key": "blob"}).json() == blob
    assert http.get(f"/api/runs/{run.id}/state").json()["items"][-1] == 19_999
    missing = http.get(f"/api/runs/{run.id}/state", params={"key": "nope"})
    assert missing.status_code == 404
    page = http.get(f"/runs/{run.id}")
    assert page.status_code == 200 and len(page.content) < 200_000 and "Large state" in page.text
    cluster.cancel(run.id)


def test_the_openapi_document_lists_the_api(http: httpx.Client) -> None:
    document = http.get("/api/openapi.json").json()
    assert document["openapi"].startswith("3.")
    assert {"/api/runs", "/api/runs/{run_id}", "/api/runs/{run_id}/steps", "/api/graphs/{graph_id}"} <= set(
        document["paths"]
    )
    assert set(document["paths"]["/api/runs"]["post"]["responses"]) >= {"201", "202", "401", "403"}


def test_a_run_whose_graph_version_was_pruned(
    http: httpx.Client, graphs: Path, cluster: Client, redis_server: EmbeddedRedis
) -> None:
    graph_id = unique("ui/pruned")
    run = cluster.submit(str(graph_file(graphs, HELLO, graph_id)), {"name": "Ada"})
    assert run.wait(timeout=WAIT).status == "completed"
    content_hash = run.snapshot().graph_hash
    with redis.Redis.from_url(redis_server.url) as client:
        assert client.delete(keys.graph(content_hash)) == 1
    shown = http.get(f"/api/runs/{run.id}").json()
    assert shown["graph_version_stored"] is False and shown["status"] == "completed"
    page = http.get(f"/runs/{run.id}")
    assert page.status_code == 200 and "which is no longer in the store" in page.text
    assert "Transcript" in page.text and "<svg" not in page.text
    graph = http.get(f"/api/graphs/{graph_id}").json()
    [version] = graph["versions"]
    assert isinstance(version["stored_at"], int)
    assert version == {
        "graph_hash": content_hash,
        "stored_at": version["stored_at"],
        "indexed": True,
        "runs": 1,
        "last_run_at": graph["runs"][0]["created_at"],
        "stored": False,
        "text": None,
    }
    assert "no longer in the store (pruned)" in http.get(f"/graphs/{graph_id}").text


def test_the_graph_lists_every_stored_version(
    http: httpx.Client, graphs: Path, cluster: Client, redis_server: EmbeddedRedis
) -> None:
    graph_id = unique("ui/versions")
    run = cluster.submit(str(graph_file(graphs, HELLO, graph_id)), {"name": "Ada"})
    assert run.wait(timeout=WAIT).status == "completed"
    old_hash = run.snapshot().graph_hash
    newer = parse_graph(
        textwrap.dedent(HELLO.replace("Hello", "Hi").format(graph_id=graph_id)), file="hi.yaml"
    )
    cluster.cluster.graphs.put(newer)  # stored as a submission stores it, after the run; never run
    shown = http.get(f"/api/graphs/{graph_id}").json()
    assert [v["graph_hash"] for v in shown["versions"]] == [newer.content_hash, old_hash]
    new, old = shown["versions"]
    assert new["indexed"] and new["stored"] and new["runs"] == 0 and new["last_run_at"] is None
    assert "Hi, " in new["text"] and "svg" not in new
    assert old["indexed"] and old["stored"] and old["runs"] == 1 and old["stored_at"] < new["stored_at"]
    assert old["last_run_at"] == shown["runs"][0]["created_at"] and [r["run_id"] for r in shown["runs"]] == [
        run.id
    ]
    with redis.Redis.from_url(redis_server.url) as client:  # as if stored before versions were indexed
        assert client.zrem(keys.graph_versions(graph_id), old_hash) == 1
    shown = http.get(f"/api/graphs/{graph_id}").json()
    assert [(v["graph_hash"], v["indexed"]) for v in shown["versions"]] == [
        (newer.content_hash, True),
        (old_hash, False),
    ]
    assert shown["versions"][1]["stored_at"] is None and shown["versions"][1]["runs"] == 1
    page = http.get(f"/graphs/{graph_id}")
    assert page.status_code == 200 and page.text.count("<svg") == 2
    assert "Stored before versions were indexed" in page.text
