"""A Rye graph file runs with the walker's semantics; a graphrunner file with its own (issue 16).

Each test runs the same construct in both dialects where they differ: result unwrapping, the
condition evaluator's comparisons and op names, `inputs` in state, a dead-end `next`,
`permissions`, kind prefixes, `tool:graphs/<id>` and flat hook contexts.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from graphrunner.errors import InvalidCapabilities
from graphrunner.graph import Graph
from graphrunner.loading.loader import inspect_graph, load_graph
from graphrunner.results import RunResult
from graphrunner.settings import Settings
from graphrunner.tools import ToolContext, ToolRegistry
from graphrunner.tools.builtin import BUILTIN_TOOLS, RYE_TOOLS


class Canned:
    """A tool that returns its `value` param as it is: envelopes, failures, plain values."""

    name = "test/canned"
    version = "1"

    async def run(self, params: dict[str, Any], context: ToolContext) -> Any:
        return params.get("value")


def registry() -> ToolRegistry:
    return ToolRegistry([*BUILTIN_TOOLS, *RYE_TOOLS, Canned()])


def rye_file(tmp_path: Path, nodes: str, name: str = "walk", extra: str = "") -> Path:
    """A Rye graph tool whose `config.nodes` are `nodes` (YAML indented by 4)."""
    body = textwrap.indent(textwrap.dedent(nodes).strip("\n"), "    ")
    text = (
        "# rye:signed:2026-01-01T00:00:00Z:abc:def:key\n"
        "version: '1.0.0'\ntool_type: graph\nexecutor_id: rye/core/runtimes/state-graph/runtime\n"
        f"{extra}"
        "config_schema:\n  type: object\n  properties:\n    limit: {type: string, default: '10'}\n"
        f"config:\n  start: first\n  nodes:\n{body}\n"
    )
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def native_file(tmp_path: Path, nodes: str, name: str = "native") -> Path:
    body = textwrap.indent(textwrap.dedent(nodes).strip("\n"), "  ")
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"id: {name}\ninputs: {{limit: {{type: string, default: '10'}}}}\nconfig: {{start: first}}\nnodes:\n{body}\n"
    )
    return path


def load(path: Path) -> Graph:
    return load_graph(path, registry=registry(), settings=Settings(graph_path=(path.parent,)))


def run(graph: Graph, inputs: dict[str, Any] | None = None, **options: Any) -> RunResult:
    return graph.invoke_sync(inputs or {}, registry=registry(), **options)


def canned(value: str) -> str:
    return f"{{primary: execute, item_type: tool, item_id: test/canned, params: {{value: {value}}}}}"


ENVELOPE = """
first:
  action: {primary: execute, item_id: "tool:test/canned", params: {value: VALUE}}
  assign: {out: "${result.stdout}", whole: "${result}"}
  on_error: recovered
  next: done
recovered:
  type: gate
  assign: {failed_at: "${state._last_error.node}"}
  next: done
done: {type: return}
"""


def test_the_execute_envelope_is_lifted_so_result_stdout_works(tmp_path: Path) -> None:
    value = "{status: success, type: tool, item_id: x, data: {stdout: hi, exit_code: 0}, chain: [a]}"
    result = load(rye_file(tmp_path, ENVELOPE.replace("VALUE", value))).invoke_sync({}, registry=registry())
    assert result.path == ["first", "done"]
    assert result.state["out"] == "hi"
    assert result.state["whole"] == {"stdout": "hi", "exit_code": 0}


def test_in_a_graphrunner_file_the_envelope_is_the_result(tmp_path: Path) -> None:
    nodes = ENVELOPE.replace(
        '{primary: execute, item_id: "tool:test/canned", params:', "{tool: test/canned, params:"
    )
    value = "{status: success, data: {stdout: hi}}"
    result = load(native_file(tmp_path, nodes.replace("VALUE", value))).invoke_sync({}, registry=registry())
    assert result.state["out"] is None
    assert result.state["whole"] == {"status": "success", "data": {"stdout": "hi"}}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{status: error, error: disk full, data: {stdout: ''}}", "disk full"),
        ("{success: false, stderr: 'no such file'}", "no such file"),
        ("{status: success, data: {success: false, exit_code: 3}}", "exit code 3"),
    ],
    ids=["status error", "success false", "inner success false"],
)
def test_a_result_that_reports_failure_is_an_action_error(tmp_path: Path, value: str, message: str) -> None:
    result = load(rye_file(tmp_path, ENVELOPE.replace("VALUE", value))).invoke_sync({}, registry=registry())
    assert result.path == ["first", "recovered", "done"]
    assert result.state["failed_at"] == "first"
    assert message in result.state["_last_error"]["message"]


def test_a_result_that_is_not_a_mapping_is_result_result(tmp_path: Path) -> None:
    nodes = """
    first:
      action: CANNED
      assign: {n: "${result.result}"}
    """.replace("CANNED", canned("42"))
    assert run(load(rye_file(tmp_path, nodes))).state["n"] == 42


GATE = """
first:
  type: gate
  assign: {count: "2\\n"}
  next:
    - {to: many, when: {path: state.count, op: gt, value: "${inputs.limit}"}}
    - {to: few}
many: {type: return, output: {verdict: many}}
few: {type: return, output: {verdict: few}}
"""


def test_text_that_reads_as_numbers_compares_as_numbers_in_a_rye_file(tmp_path: Path) -> None:
    assert run(load(rye_file(tmp_path, GATE))).output == {"verdict": "few"}  # 2 < 10


def test_a_graphrunner_file_compares_text_as_text(tmp_path: Path) -> None:
    assert run(load(native_file(tmp_path, GATE))).output == {"verdict": "many"}  # "2" > "1"


@pytest.mark.parametrize(
    ("when", "verdict"),
    [
        ("{path: state.count, value: 2}", "many"),  # op defaults to eq; "2\n" equals the number 2
        ("{path: state.count, op: ne, value: 2}", "few"),
        ("{path: state.count, op: regex, value: '^[0-9]+$'}", "many"),
        ("{path: state.count, op: lte, value: '2.0'}", "many"),
        ("{path: state.count, op: eq, value: '2'}", "few"),  # text against text stays text
        ("{all: [{path: state.count, op: exists}, {path: inputs.limit, op: in, value: ['10']}]}", "many"),
        ("{not: {path: state.inputs.limit, value: '10'}}", "few"),  # inputs are in state too
    ],
)
def test_the_walker_condition_evaluator(tmp_path: Path, when: str, verdict: str) -> None:
    nodes = GATE.replace('{path: state.count, op: gt, value: "${inputs.limit}"}', when)
    assert run(load(rye_file(tmp_path, nodes))).output == {"verdict": verdict}


def test_no_matching_branch_ends_a_rye_run_and_fails_a_graphrunner_run(tmp_path: Path) -> None:
    nodes = """
    first:
      type: gate
      assign: {x: 1}
      next: [{to: done, when: {path: state.x, op: eq, value: 2}}]
    done: {type: return}
    """
    rye = run(load(rye_file(tmp_path, nodes)))
    assert (rye.status, rye.path, rye.state["x"]) == ("completed", ["first"], 1)
    native = run(load(native_file(tmp_path, nodes)))
    assert native.status == "failed"
    assert "no branch of next matched" in native.error.message


def test_inputs_are_seeded_into_the_state_of_a_rye_run_only(tmp_path: Path) -> None:
    nodes = "first: {type: return}"
    assert load(rye_file(tmp_path, nodes)).invoke_sync({"limit": "3"}, registry=registry()).state[
        "inputs"
    ] == {"limit": "3"}
    assert "inputs" not in run(load(native_file(tmp_path, nodes))).state


PERMITTED = """
first:
  action: CANNED
  assign: {ok: true}
  next: done
done: {type: return}
""".replace("CANNED", canned("{x: 1}"))


@pytest.mark.parametrize(
    ("permissions", "status"),
    [
        ("[rye.execute.tool.test.canned]", "completed"),
        ("[rye.execute.tool.test.*]", "completed"),
        ("[rye.execute.tool.rye.bash.*]", "failed"),
        ("[]", "failed"),  # fail-closed: no permission, no dispatch
    ],
)
def test_a_rye_files_permissions_are_enforced_fail_closed(
    tmp_path: Path, permissions: str, status: str
) -> None:
    graph = load(rye_file(tmp_path, PERMITTED, extra=f"permissions: {permissions}\n"))
    result = run(graph)
    assert result.status == status
    if status == "failed":
        assert result.error.type == "permission_denied"
        assert "rye.execute.tool.test.canned" in result.error.message


def test_permissions_never_widen_the_runs_capabilities(tmp_path: Path) -> None:
    graph = load(rye_file(tmp_path, PERMITTED, extra="permissions: ['rye.*']\n"))
    assert (
        graph.invoke_sync({}, capabilities=["rye.execute.tool.test.canned"], registry=registry()).status
        == "completed"
    )
    denied = graph.invoke_sync({}, capabilities=["rye.execute.tool.other.*"], registry=registry())
    assert (denied.status, denied.error.type) == ("failed", "permission_denied")
    with pytest.raises(InvalidCapabilities, match="unknown item_type 'tools'"):
        graph.invoke_sync({}, capabilities=["rye.execute.tools.x"], registry=registry())


@pytest.mark.parametrize(
    ("item_id", "code", "words"),
    [
        ("knowledge:notes/x", "invalid_schema", "unknown kind prefix 'knowledge:'"),
        ("directive:write/report", "unknown_tool", "directive:write/report"),
        ("tool:no/such/tool", "unknown_tool", "no/such/tool"),
    ],
)
def test_kind_prefixes(tmp_path: Path, item_id: str, code: str, words: str) -> None:
    nodes = f"first: {{action: {{primary: execute, item_id: '{item_id}'}}}}"
    path = rye_file(tmp_path, nodes)
    report = inspect_graph(path, registry=registry(), settings=Settings())[1]
    assert [i.code for i in report.errors] == [code]
    assert words in report.errors[0].message
    assert (report.errors[0].location or "").startswith("config.nodes.first.action")


def test_a_graph_run_as_a_tool_is_a_child_run(tmp_path: Path) -> None:
    rye_file(tmp_path, "first: {type: return, output: {doubled: '${inputs.limit}${inputs.limit}'}}", "child")
    nodes = """
    first:
      action: {primary: execute, item_id: "tool:graphs/child", params: {limit: "${inputs.limit}"}}
      assign: {got: "${result.doubled}"}
    """
    graph = load(rye_file(tmp_path, nodes))
    assert graph.spec.nodes["first"].type == "subgraph"
    result = graph.invoke_sync({"limit": "4"}, registry=registry())
    assert (result.status, result.state["got"]) == ("completed", "44")


def hooked(tmp_path: Path, value: str, hook: str) -> Graph:
    """The ENVELOPE graph with its tool returning `value` and one hook (YAML lines under `hooks:`)."""
    text = rye_file(tmp_path, ENVELOPE.replace("VALUE", value)).read_text()
    path = tmp_path / "hooked.yaml"
    path.write_text(text.replace("config:\n", "config:\n  hooks:\n" + textwrap.indent(hook, "    "), 1))
    return load(path)


def test_rye_hooks_read_the_event_at_the_top_level(tmp_path: Path) -> None:
    hook = (
        "- event: error\n"
        "  condition: {path: node, value: first}\n"
        "  action: {primary: execute, item_id: test/canned,\n"
        "           params: {value: {control: continue, seen: '${classification} ${error.message}'}}}\n"
    )
    result = run(hooked(tmp_path, "{status: error, error: boom}", hook))
    assert result.status == "completed_with_errors"  # the hook's `continue` answer
    assert result.path == ["first", "done"]


def test_an_after_step_hook_sees_the_nodes_result(tmp_path: Path) -> None:
    seen = tmp_path / "seen.txt"
    hook = (
        "- event: after_step\n"
        "  condition: {path: result.stdout, value: hi}\n"
        "  action: {primary: execute, item_id: rye/bash/bash,\n"
        f"           params: {{command: \"printf '%s@%s' ${{node}} ${{step_count}} > {seen}\"}}}}\n"
    )
    graph = hooked(tmp_path, "{status: success, data: {stdout: hi}}", hook)
    assert run(graph).status == "completed"
    assert seen.read_text() == "first@1"
