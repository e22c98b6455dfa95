"""`graphrunner render --run`: runs read from a real Redis (executed by the in-thread worker) and
drawn on the graph version they are pinned to."""

from __future__ import annotations

import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner, Result

from graphrunner.cli import main
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis
from graphrunner.store import keys

ROOT = Path(__file__).resolve().parents[2]
SVG = "{http://www.w3.org/2000/svg}"


def branching(graph_id: str, extra: str = "") -> str:
    """A gate routing to an action that fails into its on_error recovery, then a return."""
    return f"""
id: {graph_id}
inputs:
  score: {{type: number, required: true}}
config:
  start: grade
nodes:
  grade:
    type: gate
    next:
      - {{to: publish, when: "inputs.score >= 50.0"}}
      - to: review
  publish:
    action: {{tool: echo, params: {{ok: true}}}}
    next: done
  review:
    action: {{tool: fail, params: {{message: needs a human}}}}
    retry: {{max_attempts: 1}}
    on_error: recover
    next: done
  recover:
    type: gate
    next: done{extra}
  done:
    type: return
"""


PAUSING = """
id: {graph_id}
config: {{start: a}}
nodes:
  a: {{action: {{tool: echo}}, next: approval}}
  approval: {{type: pause, next: b}}
  b: {{type: return}}
"""

FAILING = """
id: {graph_id}
config: {{start: a}}
nodes:
  a: {{action: {{tool: echo}}, next: boom}}
  boom: {{action: {{tool: fail, params: {{message: broken}}}}, retry: {{max_attempts: 1}}, next: c}}
  c: {{type: return}}
"""


@pytest.fixture
def env(redis_server: EmbeddedRedis, cluster: Client) -> dict[str, str | None]:
    """CliRunner environment: the test Redis, whose runs the in-thread worker executes."""
    return {"GRAPHRUNNER_REDIS_URL": redis_server.url, "GRAPHRUNNER_BROKER_URL": None}


def cli(env: dict[str, str | None], *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


def write(tmp_path: Path, text: str, name: str = "graph.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text.lstrip("\n"), encoding="utf-8")
    return path


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def node_classes(svg: str) -> dict[str, set[str]]:
    """Each node group's classes by its element id."""
    root = ET.fromstring(svg)
    return {
        g.get("id", ""): set((g.get("class") or "").split())
        for g in root.iter(f"{SVG}g")
        if "node" in (g.get("class") or "").split()
    }


def taken_edges(svg: str) -> set[tuple[str | None, str | None]]:
    root = ET.fromstring(svg)
    return {
        (g.get("data-source"), g.get("data-target"))
        for g in root.iter(f"{SVG}g")
        if "taken" in (g.get("class") or "").split()
    }


def test_a_finished_run_is_drawn_from_the_store_alone(
    env: dict[str, str | None], cluster: Client, tmp_path: Path
) -> None:
    path = write(tmp_path, branching(unique("render/branching")))
    result = cluster.submit(str(path), {"score": 20}).wait(timeout=60)
    assert result.status == "completed"
    path.unlink()  # the run's stored version is what is drawn: no file needed
    out = cli(env, "render", "--run", result.run_id, "--format", "svg")
    assert out.exit_code == 0, out.output
    assert out.stderr == ""
    nodes = node_classes(out.stdout)
    assert nodes["node-review"] == {"node", "action", "visited", "failed"}
    assert nodes["node-publish"] == {"node", "action"}
    assert "visited" in nodes["graph-end"]
    assert taken_edges(out.stdout) == {
        ("$start", "grade"),
        ("grade", "review"),
        ("review", "recover"),
        ("recover", "done"),
        ("done", "$end"),
    }
    root = ET.fromstring(out.stdout)
    assert root.get("data-run-id") == result.run_id and root.get("data-run-status") == "completed"
    mermaid = cli(env, "render", "--run", result.run_id)
    assert mermaid.exit_code == 0 and "failed" in mermaid.stdout and "linkStyle" in mermaid.stdout


def test_a_paused_run_shows_where_it_is(env: dict[str, str | None], cluster: Client, tmp_path: Path) -> None:
    path = write(tmp_path, PAUSING.format(graph_id=unique("render/pausing")))
    result = cluster.submit(str(path)).wait(timeout=60)
    assert result.status == "paused"
    out = cli(env, "render", str(path), "--run", result.run_id, "--format", "svg")
    assert out.exit_code == 0, out.output
    nodes = node_classes(out.stdout)
    assert "current" in nodes["node-approval"] and "visited" not in nodes["node-b"]
    cluster.resume(result.run_id).wait(timeout=60)
    resumed = cli(env, "render", "--run", result.run_id, "--format", "svg")
    assert "current" not in node_classes(resumed.stdout)["node-approval"]
    assert ("approval", "b") in taken_edges(resumed.stdout)


def test_a_failed_run_paints_the_failing_node(
    env: dict[str, str | None], cluster: Client, tmp_path: Path
) -> None:
    path = write(tmp_path, FAILING.format(graph_id=unique("render/failing")))
    result = cluster.submit(str(path)).wait(timeout=60)
    assert result.status == "failed"
    out = cli(env, "render", "--run", result.run_id, "--format", "dot")
    assert out.exit_code == 0, out.output
    boom = next(line for line in out.stdout.splitlines() if line.strip().startswith('"boom" ['))
    assert 'class="node action visited failed"' in boom
    assert "(failed)" in out.stdout.splitlines()[1]


def test_unknown_and_malformed_runs(env: dict[str, str | None]) -> None:
    missing = cli(env, "render", "--run", "no-such-run")
    assert missing.exit_code == 1  # as `status`, `steps`, ... report a run that does not exist
    assert missing.stderr == "error: no run with id 'no-such-run'\n" and missing.stdout == ""
    malformed = cli(env, "render", "--run", "{not a run id}")
    assert malformed.exit_code == 2 and malformed.stderr.startswith("error: invalid run id")


def test_a_graph_that_is_not_the_runs_graph_is_refused(
    env: dict[str, str | None], cluster: Client, tmp_path: Path
) -> None:
    graph_id = unique("render/one")
    result = cluster.submit(str(write(tmp_path, branching(graph_id))), {"score": 80}).wait(timeout=60)
    other = write(tmp_path, PAUSING.format(graph_id="render/other"), "other.yaml")
    out = cli(env, "render", str(other), "--run", result.run_id)
    assert out.exit_code == 2 and out.stdout == ""
    assert out.stderr == (
        f"error: run {result.run_id} is a run of graph '{graph_id}', not of graph 'render/other': "
        "give that graph, or --run alone to draw the version the run is pinned to\n"
    )


def test_an_edited_graph_file_does_not_change_what_the_run_ran(
    env: dict[str, str | None], cluster: Client, tmp_path: Path
) -> None:
    graph_id = unique("render/edited")
    path = write(tmp_path, branching(graph_id))
    result = cluster.submit(str(path), {"score": 80}).wait(timeout=60)
    write(tmp_path, branching(graph_id).replace("publish", "post"))
    out = cli(env, "render", str(path), "--run", result.run_id, "--format", "svg")
    assert out.exit_code == 0, out.output
    assert out.stderr == (
        f"warning: the graph given is not the version run {result.run_id} runs: the run's version is drawn\n"
    )
    nodes = node_classes(out.stdout)
    assert "node-publish" in nodes and "node-post" not in nodes
    assert "visited" in nodes["node-publish"]


def test_a_pruned_graph_version(
    env: dict[str, str | None], cluster: Client, redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    graph_id = unique("render/pruned")
    path = write(tmp_path, branching(graph_id))
    result = cluster.submit(str(path), {"score": 20}).wait(timeout=60)
    snapshot = cluster.run(result.run_id).snapshot()
    with redis.Redis.from_url(redis_server.url) as direct:
        assert direct.delete(keys.graph(snapshot.graph_hash)) == 1
    alone = cli(env, "render", "--run", result.run_id)
    assert alone.exit_code == 2 and alone.stdout == ""
    assert alone.stderr == (
        f"error: run {result.run_id} is pinned to version {snapshot.graph_hash[:12]} of graph '{graph_id}', "
        "which is no longer in the store: give the graph to draw the run on it "
        f"(graphrunner render GRAPH --run {result.run_id})\n"
    )
    given = cli(env, "render", str(path), "--run", result.run_id, "--format", "svg")
    assert given.exit_code == 0, given.output
    assert given.stderr.startswith(f"warning: version {snapshot.graph_hash[:12]} of graph '{graph_id}'")
    assert "failed" in node_classes(given.stdout)["node-review"]


def test_a_dead_redis_is_reported_not_raised(tmp_path: Path) -> None:
    from graphrunner.embedded import free_port

    out = cli({"GRAPHRUNNER_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}, "render", "--run", "some-run")
    assert out.exit_code == 1 and "Traceback" not in out.output
    assert out.stderr.startswith("error: ") and "is Redis running" in out.stderr
