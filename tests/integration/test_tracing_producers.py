"""A producer's span is the parent of the run span: `Client.submit` (explicit traceparent),
`graphrunner submit` with TRACEPARENT, and `POST /api/runs` with a `traceparent` header. Bad
values: refused by the Python API, ignored (as W3C says) with a warning by the CLI, ignored by
the HTTP API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from test_cli_cluster import cli
from test_ui_api import HELLO, graph_file
from test_ui_server import UiServer, auth_header, unique

from graphrunner import parse_graph
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis
from graphrunner.errors import GraphrunnerError

TRACE, SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
PARENT = f"00-{TRACE}-{SPAN}-01"
ECHO = "id: t/traced-echo\nconfig: {start: a}\nnodes:\n  a: {action: {tool: echo, params: {x: 1}}}\n"


@pytest.fixture(scope="module")
def ui(
    redis_server: EmbeddedRedis, cluster: Client, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[UiServer, Path]]:
    graphs = tmp_path_factory.mktemp("traced-graphs")
    with UiServer(redis_server.url, graphs, "--basic-auth", "ops:s3cret") as server:
        yield server, graphs


def test_client_submit_takes_a_traceparent_and_refuses_a_bad_one(cluster: Client) -> None:
    graph = parse_graph(ECHO)
    handle = cluster.submit(graph, traceparent=PARENT)
    link = cluster.store.load_run(handle.id).trace
    assert (link.trace_id, link.parent, link.sampled) == (TRACE, SPAN, True)
    with pytest.raises(GraphrunnerError, match="is not a W3C traceparent"):
        cluster.submit(graph, traceparent="00-abc-def-01")
    plain = cluster.store.load_run(cluster.submit(graph).id).trace
    assert plain is not None and plain.parent is None and plain.trace_id != TRACE


def test_graphrunner_submit_hangs_the_run_under_traceparent(
    redis_server: EmbeddedRedis, cluster: Client, tmp_path: Path
) -> None:
    path = tmp_path / "echo.yaml"
    path.write_text(ECHO)
    env = {"GRAPHRUNNER_REDIS_URL": redis_server.url, "TRACEPARENT": PARENT}
    done = cli(env, "submit", str(path))
    assert done.exit_code == 0, done.output
    link = cluster.store.load_run(done.stdout.strip()).trace
    assert (link.trace_id, link.parent) == (TRACE, SPAN)
    bad = cli({**env, "TRACEPARENT": "$(reboot)"}, "submit", str(path))
    assert bad.exit_code == 0 and "TRACEPARENT='$(reboot)' is not a W3C traceparent; ignored" in bad.stderr
    assert cluster.store.load_run(bad.stdout.strip()).trace.parent is None


def test_post_api_runs_hangs_the_run_under_the_traceparent_header(
    ui: tuple[UiServer, Path], cluster: Client
) -> None:
    server, graphs = ui
    graph_id = unique("ui/traced")
    graph_file(graphs, HELLO, graph_id)
    body = {"graph": graph_id, "inputs": {"name": "Ada"}}
    with httpx.Client(base_url=server.url, headers=auth_header(), timeout=30) as http:
        answer = http.post("/api/runs", json=body, headers={"traceparent": PARENT})
        assert answer.status_code == 201, answer.text
        link = cluster.store.load_run(answer.json()["run_id"]).trace
        assert (link.trace_id, link.parent) == (TRACE, SPAN)
        ignored = http.post(
            "/api/runs", json=body, headers={"traceparent": "00-" + "z" * 32 + "-" + SPAN + "-01"}
        )
        assert ignored.status_code == 201, ignored.text
        assert cluster.store.load_run(ignored.json()["run_id"]).trace.parent is None
