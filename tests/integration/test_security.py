"""Issue 24, the worker's side: a queue message never carries authority, and a producer's run
without capabilities gets the pure built-ins.

A foreach item message carries its call; anyone who can put a message on the queue (a Flower
login with control enabled, a process holding the broker's credentials) could name a live
run and a shell call. Workers run only calls signed under the cluster's key by the worker that
derived them from the run's pinned graph, and check them against the run's capabilities.
"""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from support import wait_for

from graphrunner import Graph, engine, parse_graph
from graphrunner.client import Client
from graphrunner.cluster.runs.items import call_payload
from graphrunner.cluster.transport.messages import ITEM_TASK
from graphrunner.cluster.transport.signing import Signer
from graphrunner.cluster.worker.runtime import WorkerRuntime
from graphrunner.engine import ActionCall
from graphrunner.errors import InvalidRunId
from graphrunner.settings import Settings
from graphrunner.store import RedisStore
from graphrunner.tools.builtin import pinned


def _graph() -> Graph:
    text = f"""
        id: sec/{uuid.uuid4().hex[:8]}
        inputs: {{xs: {{type: any}}}}
        state:
          out: {{type: list, default: [], reducer: append}}
        config: {{start: fan}}
        nodes:
          fan:
            type: foreach
            over: "${{inputs.xs}}"
            as: x
            parallel: true
            action: {{tool: echo, params: {{text: "${{x}}"}}}}
            assign: {{out: ["${{result.text}}"]}}
            next: done
          done: {{type: return}}
    """
    return parse_graph(textwrap.dedent(text), file="sec.yaml")


def _live_run(store: RedisStore, graph: Graph, capabilities: list[str]) -> str:
    """A run recorded as running, with `capabilities`: the target a forger names."""
    run_id = f"sec-{uuid.uuid4().hex[:8]}"
    snap = engine.begin(graph, {"xs": [1, 2]}, run_id=run_id, capabilities=capabilities)
    store.create_run(snap, "test")
    return run_id


def _payload(run_id: str, graph: Graph, tag: str, marker: Path) -> dict[str, Any]:
    """An item message whose call runs `touch marker` in a shell step."""
    call = ActionCall(node="fan", tool="shell", params={"argv": ["touch", str(marker)]}, item_index=0)
    return {
        "run_id": run_id,
        "graph_id": graph.id,
        "graph_hash": graph.content_hash,
        "step": 1,
        "tag": tag,
        "index": 0,
        "call": call_payload(call),
    }


def _refusals(store: RedisStore, run_id: str) -> list[str]:
    return [d.reason for d in store.dead_letters(100) if run_id in d.reason]


@pytest.mark.parametrize("forgery", ["unsigned", "wrong key", "altered after signing"])
def test_a_forged_item_message_is_refused_unrun(
    cluster: Client, worker_runtime: WorkerRuntime, tmp_path: Path, forgery: str
) -> None:
    graph, marker = _graph(), tmp_path / "PWNED"
    run_id = _live_run(cluster.store, graph, ["*"])  # even a run that may do everything
    payload = _payload(run_id, graph, "1.1.f0f0f0f0", marker)
    if forgery == "wrong key":
        payload = Signer(b"not the cluster's key").sign(payload)
    elif forgery == "altered after signing":
        harmless = {**payload, "call": {**payload["call"], "tool": "echo", "params": {"text": "hi"}}}
        payload = {**Signer.of(Settings(), cluster.store).sign(harmless), "call": payload["call"]}
    worker_runtime.app.send_task(ITEM_TASK, args=[payload], queue="graphrunner")
    wait_for(lambda: bool(_refusals(cluster.store, run_id)), 30, "the forged item's dead letter")
    [reason] = _refusals(cluster.store, run_id)
    assert "does not carry a valid signature" in reason
    assert not marker.exists()
    assert cluster.store.count_items(run_id, "1.1.f0f0f0f0") == 0  # nothing recorded for the run


def test_a_signed_item_the_run_may_not_make_is_permission_denied(
    cluster: Client, worker_runtime: WorkerRuntime, tmp_path: Path
) -> None:
    """The second line: even a validly signed call is checked against the run's capabilities."""
    graph, marker = _graph(), tmp_path / "PWNED"
    run_id = _live_run(cluster.store, graph, ["tool:echo"])
    tag = "1.1.0e0e0e0e"
    signed = Signer.of(Settings(), cluster.store).sign(_payload(run_id, graph, tag, marker))
    worker_runtime.app.send_task(ITEM_TASK, args=[signed], queue="graphrunner")
    wait_for(lambda: cluster.store.count_items(run_id, tag) == 1, 30, "the item's record")
    [record] = list(cluster.store.item_records(run_id, tag, 1))
    assert record is not None and record["ok"] is False
    assert record["error"]["type"] == "permission_denied" and "'tool:shell'" in record["error"]["message"]
    assert not marker.exists()
    cluster.store.drop_items(run_id, tag)


SHELL_GRAPH = """
id: sec/shell
state: {out: {type: string}}
config: {start: touch}
nodes:
  touch:
    action: {tool: shell, params: {argv: [touch, MARKER]}}
    assign: {out: "${result.stdout}"}
    next: done
  done: {type: return}
"""


def test_a_producers_run_without_capabilities_gets_only_the_pure_builtins(
    cluster: Client, worker_runtime: WorkerRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GRAPHRUNNER_DEFAULT_CAPABILITIES")  # as shipped: nothing written
    marker = tmp_path / "MARKER"
    graph = parse_graph(SHELL_GRAPH.replace("MARKER", str(marker)), file="shell.yaml")
    producer = Client(settings=Settings.from_env().with_redis(cluster.settings.redis_url or ""))
    try:
        result = producer.submit(graph).wait(timeout=60)
        assert result.status == "failed" and not marker.exists()
        assert result.error is not None and result.error.type == "permission_denied"
        assert "['tool:echo', 'tool:fail', 'tool:sleep']" in result.error.message
        granted = producer.submit(graph, capabilities=["tool:shell"]).wait(timeout=60)
        assert granted.status == "completed" and marker.exists()
    finally:
        producer.close()


def test_a_run_id_ending_in_a_newline_is_refused(cluster: Client) -> None:
    with pytest.raises(InvalidRunId, match="invalid run id 'abc\\\\n'"):
        cluster.submit(_graph(), {"xs": [1]}, run_id="abc\n")
    assert cluster.store.status_of("abc\n") is None


# -- what a granted tool may reach, on a real worker ----------------------------------------------


def _one_step(action: str) -> Graph:
    text = f"""
        id: sec/{uuid.uuid4().hex[:8]}
        state: {{out: {{type: any}}}}
        config: {{start: a}}
        nodes:
          a:
            action: {action}
            assign: {{out: "${{result}}"}}
            next: done
          done: {{type: return, output: {{out: "${{state.out}}"}}}}
    """
    return parse_graph(textwrap.dedent(text), file="sec.yaml")


def test_a_python_capability_does_not_reach_what_its_module_imported(cluster: Client, tmp_path: Path) -> None:
    target = tmp_path / "made-by-os-mkdir"
    graph = _one_step(
        f'{{tool: python, params: {{fn: "graphrunner.settings:os.mkdir", args: {{path: "{target}"}}}}}}'
    )
    result = cluster.submit(graph, capabilities=["tool:python:graphrunner.*"]).wait(timeout=60)
    assert result.status == "failed" and not target.exists()
    assert result.error is not None and "posix" in result.error.message, result.error


def test_a_shell_step_gets_no_worker_secret(
    cluster: Client, worker_runtime: WorkerRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The in-thread worker shares this process's environment: what it holds, a step must not see."""
    monkeypatch.setenv("FLOWER_BASIC_AUTH", "ops:fl0wer-secret")
    monkeypatch.setenv("GRAPHRUNNER_UI_BASIC_AUTH", "ops:expl0rer-secret")
    result = cluster.submit(_one_step("{tool: shell, params: {argv: [env]}}")).wait(timeout=60)
    assert result.status == "completed", result.error
    seen = result.output["out"]["stdout"]
    assert "PATH=" in seen and "secret" not in seen and "GRAPHRUNNER_REDIS_URL" not in seen


def test_the_http_tool_refuses_a_name_that_resolves_to_the_metadata_service(
    cluster: Client, worker_runtime: WorkerRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The resolver is stubbed: nothing is sent anywhere, the check refuses before connecting."""
    asked: list[str] = []

    async def stub(host: str, port: int) -> list[str]:
        asked.append(host)
        return ["169.254.169.254"]

    monkeypatch.setattr(pinned, "resolve", stub)
    graph = _one_step('{tool: http, params: {url: "http://innocent.test/latest/meta-data/"}}')
    result = cluster.submit(graph, capabilities=["tool:http"]).wait(timeout=60)
    assert asked == ["innocent.test"]
    assert result.status == "failed" and result.error is not None
    assert "169.254.169.254" in result.error.message and "refused" in result.error.message
