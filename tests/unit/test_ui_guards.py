"""The run explorer's guards as pure functions: the Host allow-list, `--no-auth`'s loopback check,
credentials compared in bytes, the failed-login throttle, narrowing a login's capabilities, and
the static walk of the capabilities a graph's dispatches need."""

from __future__ import annotations

import base64
import textwrap

import pytest

from graphrunner.errors import InvalidCapabilities
from graphrunner.loading import parse_spec
from graphrunner.model import GraphSpec
from graphrunner.ui.auth import UiAuthError, basic_user, check_address
from graphrunner.ui.guard import allowed_hosts, host_problem
from graphrunner.ui.logins import Login
from graphrunner.ui.permits import SubmitRefused, run_capabilities
from graphrunner.ui.throttle import LoginThrottle
from graphrunner.validation.grants import missing_grants

USERS = {"ops": Login(b"s3cret"), "jürgen": Login("pässwörd".encode())}
SPECS = {
    "main": """
        id: main
        config:
          start: fan
          hooks: [{event: graph_completed, action: {tool: http, params: {url: "https://x.example"}}}]
        nodes:
          fan: {type: parallel, branches: {a: {graph: leaf}, b: {graph: main}}, next: each}
          each: {type: foreach, over: [1], graph: other, next: call}
          call: {action: {tool: python, params: {fn: "pkg.mod:fn"}}, next: dyn}
          dyn: {action: {tool: python, params: {fn: "${state.fn}"}}}
    """,
    "leaf": "id: leaf\nconfig: {start: s}\nnodes: {s: {action: {tool: shell, params: {argv: [ls]}}}}\n",
    "other": "id: other\nconfig: {start: e}\nnodes: {e: {action: {tool: echo}}}\n",
}


def spec(graph_id: str) -> GraphSpec:
    return parse_spec(textwrap.dedent(SPECS[graph_id]))


def header(user: bytes, password: bytes) -> str:
    return "Basic " + base64.b64encode(user + b":" + password).decode()


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("localhost:8808", True),
        ("127.0.0.1:8808", True),
        ("[::1]:8808", True),
        ("127.0.0.2", True),
        ("runs.example.com", True),
        ("runs.example.com:443", True),
        ("evil.example:8808", False),
        ("127.evil.example", False),
        ("localhost.evil", False),
        ("localhost@evil.example", False),
        ("localhost:notaport", False),
        ("", False),
    ],
)
def test_the_host_allow_list(host: str, allowed: bool) -> None:
    hosts = allowed_hosts("0.0.0.0", ["https://runs.example.com"])
    assert (host_problem(host, hosts) is None) is allowed


@pytest.mark.parametrize(
    "address", ["127.evil.example", "localhost.evil", "localhost", "0.0.0.0", "10.0.0.1"]
)
def test_no_auth_takes_only_a_loopback_ip(address: str) -> None:
    with pytest.raises(UiAuthError, match="loopback IP address only"):
        check_address(address, users={}, no_auth=True)


@pytest.mark.parametrize("address", ["127.0.0.1", "127.8.9.10", "::1"])
def test_no_auth_on_a_loopback_ip(address: str) -> None:
    check_address(address, users={}, no_auth=True)


def test_credentials_compare_as_bytes_and_anything_unreadable_is_nobody() -> None:
    assert basic_user(header(b"ops", b"s3cret"), USERS) == "ops"
    assert basic_user(header("jürgen".encode(), "pässwörd".encode()), USERS) == "jürgen"
    unreadable = [
        header(b"ops", "sëcret".encode()),  # non-ASCII, wrong
        header("öps".encode(), b"s3cret"),  # non-ASCII user
        header(b"ops", b"\xff\xfe"),  # not UTF-8
        "Basic " + base64.b64encode(b"ops-s3cret").decode(),  # no colon
        "Basic not*base64",
        "Basic " + "é" * 8,
        "Bearer abc",
        None,
    ]
    for value in unreadable:
        assert basic_user(value, USERS) is None, value


def test_the_throttle_refuses_a_client_after_its_failures_until_the_window_passes() -> None:
    now = [100.0]
    throttle = LoginThrottle(max_failures=3, window=10, clock=lambda: now[0])
    for _ in range(3):
        assert throttle.retry_after("10.0.0.1") is None
        throttle.failed("10.0.0.1")
    assert throttle.retry_after("10.0.0.1") == 10
    assert throttle.retry_after("10.0.0.2") is None  # per client
    now[0] += 10.5
    assert throttle.retry_after("10.0.0.1") is None


def test_capabilities_in_a_body_may_only_narrow() -> None:
    granted = ("tool:echo", "tool:http", "graph:team/*")
    assert run_capabilities(granted, None, "ops") == granted
    assert run_capabilities(granted, ["tool:echo", "graph:team/*", "graph:team/x"], "ops") == (
        "tool:echo",
        "graph:team/*",
        "graph:team/x",
    )
    for wider in (["*"], ["tool:*"], ["graph:team/x*"], ["tool:shell"]):
        with pytest.raises(SubmitRefused) as refused:
            run_capabilities(granted, wider, "ops")
        assert refused.value.details["capability"] == wider[0]
    with pytest.raises(InvalidCapabilities):
        run_capabilities(granted, "tool:echo", "ops")


def test_the_static_walk_follows_children_and_hooks() -> None:
    missing = missing_grants(spec("main"), ("tool:echo",), lambda parent, child: spec(child))
    found = [(m.graph, m.node, m.tool, m.child, m.capability) for m in missing]
    assert found == [
        ("main", "call", "python", None, "tool:python"),
        ("main", "dyn", "python", None, "tool:python"),
        ("main", "fan", None, "leaf", "graph:leaf"),
        ("main", "fan", None, "main", "graph:main"),
        ("main", "each", None, "other", "graph:other"),
        ("main", "hook:graph_completed", "http", None, "tool:http"),
        ("leaf", "s", "shell", None, "tool:shell"),
    ]
    assert "tool:python:pkg.mod.fn" in missing[0].needs and missing[1].needs[0] == "tool:python"
    granted = ("tool:echo", "tool:http", "tool:python:pkg.*", "graph:*")
    left = missing_grants(spec("main"), granted, lambda parent, child: spec(child))
    assert [(m.node, m.capability) for m in left] == [("dyn", "tool:python"), ("s", "tool:shell")]
