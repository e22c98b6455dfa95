"""The run explorer secure by default (issue 24), over real HTTP against one explorer: per-login
capabilities checked before a run exists, the Host allow-list, unreadable credentials, JSON nested
past the limit, a run id ending in a newline, failed logins slowed per client; and the start-up
refusals (users file, placeholder passwords, Redis URL)."""

from __future__ import annotations

import base64
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from click.testing import CliRunner
from test_ui_api import HELLO, PAUSING, graph_file
from test_ui_server import UiServer, auth_header, unique

from graphrunner.cli import main
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis
from graphrunner.settings import PURE_BUILTINS

WAIT = 60.0
OPS = ("ops", "0ps-secret-pass")
VIEWER = ("viewer", "v1ewer-secret-pass")
PLAIN = ("plain", "pl41n-secret-pass")
UMLAUT = ("jürgen", "pässwörd-1")
OPS_GRANTS = ["tool:shell", "tool:rye/bash*", "graph:*"]
SHELL = """
id: {graph_id}
config: {{start: a}}
nodes:
  a: {{action: {{tool: shell, params: {{argv: ["true"]}}}}}}
"""
PARENT = """
id: {graph_id}
config: {{start: child}}
nodes:
  child: {{type: subgraph, graph: {child}}}
"""
HOOKED = """
id: {graph_id}
config:
  start: a
  hooks: [{{event: graph_started, action: {{tool: shell, params: {{argv: ["true"]}}}}}}]
nodes:
  a: {{action: {{tool: echo}}}}
"""


def users_file(directory: Path) -> Path:
    (directory / "ops-password").write_text(OPS[1] + "\n", encoding="utf-8")
    path = directory / "users.yaml"
    path.write_text(
        "users:\n"
        f"  ops: {{password_file: ops-password, capabilities: {OPS_GRANTS}}}\n"  # next to the file
        "  viewer: {password_env: UI_TEST_VIEWER_PASSWORD}\n"
        f'  "{UMLAUT[0]}": {{password: "{UMLAUT[1]}"}}\n',
        encoding="utf-8",
    )
    return path


def login(user: tuple[str, str]) -> dict[str, str]:
    return auth_header(*user)


def raw_login(credential: bytes) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(credential).decode()}


def from_address(server: UiServer, source: str) -> httpx.Client:
    """A client whose requests come from another loopback address (its own failed-login count)."""
    transport = httpx.HTTPTransport(local_address=source)
    return httpx.Client(base_url=server.url, transport=transport, timeout=30)


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ui-security-graphs")


@pytest.fixture(scope="module")
def server(redis_server: EmbeddedRedis, cluster: Client, graphs: Path) -> Iterator[UiServer]:
    args = ("--users", str(users_file(graphs)), "--basic-auth", ":".join(PLAIN))
    args += ("--max-login-failures", "8", "--login-window", "5")  # 8 failures fit in it on any load
    env = {"GRAPHRUNNER_DEFAULT_CAPABILITIES": "*", "UI_TEST_VIEWER_PASSWORD": VIEWER[1]}
    with UiServer(redis_server.url, graphs, *args, env=env) as ui:
        yield ui


@pytest.fixture
def http(server: UiServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def no_runs(http: httpx.Client, graph_id: str) -> bool:
    return http.get("/api/runs", params={"graph": graph_id}, headers=login(OPS)).json()["runs"] == []


def test_a_basic_auth_login_may_not_run_shell_whatever_the_default_capabilities(
    http: httpx.Client, graphs: Path
) -> None:
    """GRAPHRUNNER_DEFAULT_CAPABILITIES=* is set for the explorer: its logins ignore it."""
    graph_id = unique("ui/shell")
    graph_file(graphs, SHELL, graph_id)
    me = http.get("/api/me", headers=login(PLAIN)).json()
    assert me == {"user": "plain", "capabilities": list(PURE_BUILTINS)}
    answer = http.post("/api/runs", json={"graph": graph_id}, headers=login(PLAIN))
    assert answer.status_code == 403, answer.text
    error = answer.json()["error"]
    assert error["code"] == "permission_denied" and error["type"] == "PermissionDenied"
    assert (error["node"], error["tool"], error["capability"]) == ("a", "shell", "tool:shell")
    assert "node 'a'" in error["message"] and "'tool:shell'" in error["message"]
    assert no_runs(http, graph_id)


INJECTION = ". -maxdepth 0; echo INJECTED uid=$(id -u) #"


def test_the_rye_example_reproduction_runs_nothing_it_was_not_granted(
    http: httpx.Client, graphs: Path, cluster: Client
) -> None:
    """The issue's reproduction: POST rye/count-files with shell syntax in an input."""
    root = Path(__file__).resolve().parents[2]
    shutil.copytree(root / "graphs" / "rye", graphs / "rye", dirs_exist_ok=True)
    body = {"graph": "rye/count-files", "inputs": {"directory": INJECTION}}
    refused = http.post("/api/runs", json=body, headers=login(PLAIN))  # a login with no grants
    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert (error["code"], error["capability"]) == ("permission_denied", "tool:rye/bash/bash")
    assert no_runs(http, "rye/count-files")
    granted = http.post("/api/runs", json=body, headers=login(OPS))  # granted the bash tool
    assert granted.status_code == 201, granted.text
    result = cluster.run(granted.json()["run_id"]).wait(timeout=WAIT)
    assert result.status == "completed", result.error
    assert result.state["count"].strip() == "0"  # find got one (missing) directory: nothing ran
    records = cluster.run(result.run_id).steps()
    assert not any("uid=" in str(r) for r in records)


def test_a_users_file_login_runs_with_its_own_capabilities(
    http: httpx.Client, graphs: Path, cluster: Client
) -> None:
    graph_id = unique("ui/shell")
    graph_file(graphs, SHELL, graph_id)
    assert http.get("/api/me", headers=login(OPS)).json()["capabilities"] == [*PURE_BUILTINS, *OPS_GRANTS]
    answer = http.post("/api/runs", json={"graph": graph_id}, headers=login(OPS))
    assert answer.status_code == 201, answer.text
    run = cluster.run(answer.json()["run_id"])
    assert run.wait(timeout=WAIT).status == "completed"
    assert http.get(f"/api/runs/{run.id}", headers=login(OPS)).json()["capabilities"] == [
        *PURE_BUILTINS,
        *OPS_GRANTS,
    ]
    assert http.get("/api/runs", headers=login(VIEWER)).status_code == 200  # password_env
    assert http.get("/api/me", headers=login(UMLAUT)).json()["user"] == UMLAUT[0]  # non-ASCII password


def test_capabilities_in_the_body_may_only_narrow_the_login(
    http: httpx.Client, graphs: Path, cluster: Client
) -> None:
    graph_id = unique("ui/shell")
    graph_file(graphs, SHELL, graph_id)
    for wider in (["*"], ["tool:*"], ["tool:http"]):
        answer = http.post("/api/runs", json={"graph": graph_id, "capabilities": wider}, headers=login(OPS))
        assert answer.status_code == 403 and answer.json()["error"]["capability"] == wider[0], answer.text
    narrower = http.post(
        "/api/runs", json={"graph": graph_id, "capabilities": ["tool:echo"]}, headers=login(OPS)
    )
    assert narrower.status_code == 403 and narrower.json()["error"]["capability"] == "tool:shell"
    assert no_runs(http, graph_id)
    bad = http.post("/api/runs", json={"graph": graph_id, "capabilities": "tool:shell"}, headers=login(OPS))
    assert bad.status_code == 422 and bad.json()["error"]["type"] == "InvalidCapabilities"
    answer = http.post(
        "/api/runs", json={"graph": graph_id, "capabilities": ["tool:shell"]}, headers=login(OPS)
    )
    assert answer.status_code == 201, answer.text
    run = cluster.run(answer.json()["run_id"])
    assert run.wait(timeout=WAIT).status == "completed"
    assert run.snapshot().capabilities == ("tool:shell",)


def test_child_graphs_and_hooks_are_checked_before_a_step_runs(http: httpx.Client, graphs: Path) -> None:
    child = unique("ui/shell")
    graph_file(graphs, SHELL, child)
    parent = unique("ui/parent")
    graph_file(graphs, PARENT.replace("{child}", child), parent)
    answer = http.post("/api/runs", json={"graph": parent}, headers=login(VIEWER))
    assert answer.status_code == 403, answer.text
    error = answer.json()["error"]
    assert (error["node"], error["capability"]) == ("child", f"graph:{child}")
    assert [(m["graph"], m["node"], m["capability"]) for m in error["missing"]] == [
        (parent, "child", f"graph:{child}"),
        (child, "a", "tool:shell"),
    ]
    hooked = unique("ui/hooked")
    graph_file(graphs, HOOKED, hooked)
    answer = http.post("/api/runs", json={"graph": hooked}, headers=login(VIEWER))
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"]["node"] == "hook:graph_started"
    assert no_runs(http, parent) and no_runs(http, child) and no_runs(http, hooked)


def test_resuming_needs_every_capability_the_run_carries(
    http: httpx.Client, graphs: Path, cluster: Client
) -> None:
    run = cluster.submit(
        str(graph_file(graphs, PAUSING, unique("ui/pausing"))), capabilities=["tool:echo", "tool:shell"]
    )
    assert run.wait(timeout=WAIT).status == "paused"
    patch = {"state_patch": {"approved": True}}
    refused = http.post(f"/api/runs/{run.id}/resume", json=patch, headers=login(VIEWER))
    assert refused.status_code == 403 and refused.json()["error"]["capability"] == "tool:shell"
    assert run.status() == "paused"
    resumed = http.post(f"/api/runs/{run.id}/resume", json=patch, headers=login(OPS))
    assert resumed.status_code == 200, resumed.text
    assert run.wait(timeout=WAIT).status == "completed"


def test_forking_needs_every_capability_the_run_carries(
    http: httpx.Client, graphs: Path, cluster: Client
) -> None:
    """A fork carries its origin's capabilities: a login that could not have submitted the run
    cannot fork it, whatever the patch."""
    run = cluster.submit(
        str(graph_file(graphs, PAUSING, unique("ui/pausing"))), capabilities=["tool:echo", "tool:shell"]
    )
    assert run.wait(timeout=WAIT).status == "paused"
    body = {"step": 1, "state_patch": {"approved": True}}
    refused = http.post(f"/api/runs/{run.id}/fork", json=body, headers=login(VIEWER))
    assert refused.status_code == 403 and refused.json()["error"]["capability"] == "tool:shell"
    assert [r.run_id for r in cluster.list_runs(run.snapshot().graph_id)] == [run.id]
    forked = http.post(f"/api/runs/{run.id}/fork", json=body, headers=login(OPS))
    assert forked.status_code == 201, forked.text
    fork = cluster.run(forked.json()["run_id"])
    assert fork.snapshot().capabilities == ("tool:echo", "tool:shell")
    assert fork.wait(timeout=WAIT).status == "paused"  # at the pause again, approved by the patch
    for paused in (run.id, fork.id):
        cluster.cancel(paused)


def test_a_schedule_carries_its_login_and_only_such_a_login_starts_its_runs(
    http: httpx.Client, graphs: Path, cluster: Client
) -> None:
    """Adding a schedule is submitting runs later: its runs carry the login's capabilities, checked
    against the graph now; resuming, triggering or backfilling needs them all; pausing and
    removing (stopping) any login may do."""
    graph_id = unique("ui/shell")
    graph_file(graphs, SHELL, graph_id)
    body = {"graph": graph_id, "name": "nightly", "cron": "0 2 * * *", "paused": True}
    refused = http.post("/api/schedules", json=body, headers=login(PLAIN))
    assert refused.status_code == 403 and refused.json()["error"]["capability"] == "tool:shell"
    url = f"/api/schedules/{quote(graph_id + '/nightly', safe='')}"
    assert http.get(url, headers=login(OPS)).status_code == 404  # nothing stored
    wider = http.post("/api/schedules", json=body | {"capabilities": ["*"]}, headers=login(OPS))
    assert wider.status_code == 403 and wider.json()["error"]["capability"] == "*"
    added = http.post("/api/schedules", json=body, headers=login(OPS))
    assert added.status_code == 201, added.text
    try:
        assert added.json()["capabilities"] == [*PURE_BUILTINS, *OPS_GRANTS]
        for action in ("resume", "trigger"):
            answer = http.post(f"{url}/{action}", json={}, headers=login(VIEWER))
            assert answer.status_code == 403 and answer.json()["error"]["capability"] == "tool:shell", action
        window = {"start": "2026-01-01T00:00:00", "end": "2026-01-03T00:00:00"}
        assert http.post(f"{url}/backfill", json=window, headers=login(VIEWER)).status_code == 403
        assert no_runs(http, graph_id)
        assert http.post(f"{url}/pause", json={}, headers=login(VIEWER)).status_code == 200
        triggered = http.post(f"{url}/trigger", json={}, headers=login(OPS))
        assert triggered.status_code == 200, triggered.text
        run = cluster.run(triggered.json()["run_id"])
        assert run.wait(timeout=WAIT).status == "completed"
        assert run.snapshot().capabilities == (*PURE_BUILTINS, *OPS_GRANTS)
    finally:
        assert http.post(f"{url}/remove", json={}, headers=login(VIEWER)).status_code == 200


def test_a_foreign_host_is_refused_even_with_credentials(server: UiServer, http: httpx.Client) -> None:
    evil = f"evil.example:{server.port}"
    for method, path in (
        ("GET", "/api/runs"),
        ("GET", "/"),
        ("GET", "/static/ui.css"),
        ("POST", "/api/runs"),
    ):
        headers = login(OPS) | {"Host": evil, "Origin": f"http://{evil}"}
        answer = http.request(method, path, headers=headers, json={"graph": "x"})
        assert answer.status_code == 421, (method, path, answer.text)
        assert "is not one this run explorer answers to" in answer.text, path  # a page: as HTML
    local = http.get("/api/runs", headers=login(OPS) | {"Host": f"localhost:{server.port}"})
    assert local.status_code == 200


def test_unreadable_credentials_are_401(server: UiServer) -> None:
    unreadable = [
        raw_login("nobody:wröng".encode()),  # an unknown user, a non-ASCII password: was a 500
        raw_login("ops:wröng".encode()),
        raw_login(b"ops:\xff\xfe"),  # not UTF-8
        raw_login(b"ops-without-a-colon"),
        {"Authorization": "Basic %%%not-base64"},
        {"Authorization": b"Basic " + "é".encode("latin-1") * 8},
        raw_login(f"{UMLAUT[0]}:{OPS[1]}".encode()),  # a right password, another user's
    ]
    with from_address(server, "127.0.0.2") as client:
        for headers in unreadable:
            answer = client.get("/api/runs", headers=headers)
            assert answer.status_code == 401, headers
            assert answer.json()["error"]["type"] == "Unauthorized"


def test_json_nested_past_the_limit_or_not_json_is_400(http: httpx.Client) -> None:
    deep = "[" * 5000 + "]" * 5000
    bodies = [
        ('{"graph": "ui/any", "inputs": {"x": ' + deep + "}}").encode(),
        b'{"graph": "ui/any", "inputs": {"x": NaN}}',
        b'{"graph": "\xff"}',
        b'{"graph": "ui/any", "inputs": {"x": 1' + b"0" * 5000 + b"}}",
    ]
    for body in bodies:
        headers = login(OPS) | {"Content-Type": "application/json"}
        answer = http.post("/api/runs", content=body, headers=headers)
        assert answer.status_code == 400, (body[:60], answer.text)
        assert answer.json()["error"]["type"] == "BadJson"
    too_deep = http.post("/api/runs", content=bodies[0], headers=headers).json()["error"]["message"]
    assert "64 levels (the nesting limit)" in too_deep
    resume = http.post(
        "/api/runs/no-such-run/resume", content=b'{"state_patch": ' + deep.encode() + b"}", headers=headers
    )
    assert resume.status_code == 400 and "nesting limit" in resume.json()["error"]["message"]


def test_a_run_id_ending_in_a_newline_is_refused(http: httpx.Client, graphs: Path) -> None:
    graph_id = unique("ui/hello")
    graph_file(graphs, HELLO, graph_id)
    body = {"graph": graph_id, "inputs": {"name": "Ada"}, "run_id": "abc\n"}
    answer = http.post("/api/runs", json=body, headers=login(OPS))
    assert answer.status_code == 400 and answer.json()["error"]["type"] == "InvalidRunId"
    assert no_runs(http, graph_id)


def test_failed_logins_are_slowed_per_client(server: UiServer, http: httpx.Client) -> None:
    with from_address(server, "127.0.0.3") as client:
        for _ in range(8):
            assert client.get("/api/runs", headers=login((OPS[0], "guess"))).status_code == 401
        refused = client.get("/api/runs", headers=login(OPS))
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
        assert "too many failed logins" in refused.json()["error"]["message"]
        assert http.get("/api/runs", headers=login(OPS)).status_code == 200  # another client
        deadline = time.monotonic() + WAIT
        while (status := client.get("/api/runs", headers=login(OPS)).status_code) == 429:
            assert time.monotonic() < deadline, "still refused long after the 5 s window"
            time.sleep(0.2)  # polling until the window passes, not a timing assertion
        assert status == 200


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("{password: p4ss-word, role: admin}", "user 'u': unknown key 'role'"),
        ("{password: p4ss-word, password_env: HOME}", "user 'u': give exactly one of"),
        ("{password_file: /nonexistent/secret}", "user 'u': password_file: cannot read /nonexistent/secret"),
        (
            "{password_env: UI_TEST_UNSET_VARIABLE}",
            "user 'u': password_env: the variable UI_TEST_UNSET_VARIABLE",
        ),
        ('{password: ""}', "user 'u': password must be non-empty text"),
        ("{password: change-me}", "user 'u': password: the password is the example placeholder"),
        (
            "{password: p4ss-word, capabilities: tool:shell}",
            "user 'u': capabilities: capabilities must be a list",
        ),
        ("{password: p4ss-word, capabilities: [' tool:shell']}", "user 'u': capabilities: capability 0"),
    ],
)
def test_a_users_file_that_cannot_work_is_refused_at_start(tmp_path: Path, entry: str, expected: str) -> None:
    path = write(tmp_path / "users.yaml", f"users:\n  u: {entry}\n")
    env = {"GRAPHRUNNER_REDIS_URL": "redis://127.0.0.1:1/0", "UI_TEST_UNSET_VARIABLE": ""}
    out = CliRunner().invoke(main, ["ui", "--users", path], env=env)
    assert out.exit_code == 2, out.output
    assert f"{path}: {expected}" in out.stderr


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (
            ["--basic-auth", "ops:change-me"],
            {},
            "--basic-auth (GRAPHRUNNER_UI_BASIC_AUTH) user 'ops' still holds",
        ),
        ([], {"GRAPHRUNNER_UI_BASIC_AUTH": "ops:CHANGEME"}, "user 'ops' still holds the example password"),
        (
            ["--basic-auth", "ops:s3cret-pass"],
            {"GRAPHRUNNER_REDIS_URL": "redis://:change-me@127.0.0.1:1/0"},
            "GRAPHRUNNER_REDIS_URL still holds the example password",
        ),
    ],
)
def test_placeholder_passwords_are_refused_at_start(
    args: list[str], env: dict[str, str], expected: str
) -> None:
    out = CliRunner().invoke(
        main, ["ui", *args], env={"GRAPHRUNNER_REDIS_URL": "redis://127.0.0.1:1/0"} | env
    )
    assert out.exit_code == 2, out.output
    assert expected in out.stderr
