"""Capabilities (DESIGN §2.8) and limits (§7) in-process: fail-closed dispatch, the deployment's
default capabilities, children that never widen them, and the state size limit."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import engine_targets
import pytest
from click.testing import CliRunner
from yaml_files import write

from graphrunner import Graph, InvalidCapabilities, LimitExceeded, PermissionDenied, RunResult, load_graph
from graphrunner.cli import main
from graphrunner.engine.capabilities import checked
from graphrunner.runner import LocalRunner
from graphrunner.services import StepServices
from graphrunner.settings import Settings


def shell_graph(marker: Path, graph_id: str = "caps/shell") -> str:
    return f"""
        id: {graph_id}
        config: {{start: hello}}
        nodes:
          hello: {{action: {{tool: echo, params: {{x: 1}}}}, assign: {{said: hi}}, next: touch}}
          touch:
            action: {{tool: shell, params: {{argv: [touch, "{marker}"]}}}}
            assign: {{touched: true}}
    """


# --- capabilities ---------------------------------------------------------------------------------


def test_a_shell_node_without_tool_shell_is_denied_and_never_runs(
    run_yaml: Callable[..., RunResult], tmp_path: Path
) -> None:
    marker = tmp_path / "MARKER"
    result = run_yaml(shell_graph(marker), capabilities=["tool:echo"])
    assert result.status == "failed"
    assert result.error is not None and result.error.type == "permission_denied"
    assert result.error.node == "touch"
    assert "'shell'" in result.error.message and "'tool:shell'" in result.error.message
    assert not marker.exists()
    assert "touched" not in result.state and result.state["said"] == "hi"  # nothing assigned
    assert run_yaml(shell_graph(marker), capabilities=["tool:echo", "tool:shell"]).status == "completed"
    assert marker.exists()


def test_a_denied_action_raises_permission_denied_with_the_state(
    run_yaml: Callable[..., RunResult], tmp_path: Path
) -> None:
    result = run_yaml(shell_graph(tmp_path / "MARKER"), capabilities=["tool:echo"])
    with pytest.raises(PermissionDenied, match="tool:shell") as raised:
        result.raise_for_error()
    assert raised.value.node == "touch" and raised.value.state["said"] == "hi"


def test_a_denied_foreach_item_runs_nothing(run_yaml: Callable[..., RunResult], tmp_path: Path) -> None:
    text = f"""
        id: caps/each
        config: {{start: each}}
        nodes:
          each:
            type: foreach
            over: [a, b]
            parallel: true
            action: {{tool: shell, params: {{argv: [touch, "{tmp_path}/${{item}}"]}}}}
    """
    result = run_yaml(text, capabilities=["tool:echo"])
    assert result.status == "failed"
    assert result.error is not None and result.error.type == "permission_denied"
    assert "2 of 2 items failed" in result.error.message and "'tool:shell'" in result.error.message
    assert list(tmp_path.iterdir()) == []


def test_the_deployments_default_capabilities_apply_when_none_are_given(
    graph_of: Callable[[str], Graph], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "MARKER"
    graph = graph_of(shell_graph(marker))
    monkeypatch.setenv("GRAPHRUNNER_DEFAULT_CAPABILITIES", "tool:echo, graph:*")
    result = graph.invoke_sync()
    assert result.error is not None and result.error.type == "permission_denied"
    assert "['tool:echo', 'graph:*']" in result.error.message
    assert not marker.exists()
    assert graph.invoke_sync(capabilities=["*"]).status == "completed"  # explicit ones win


def test_cli_in_process_run_uses_the_default_and_the_capability_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "MARKER"
    path = write(tmp_path, "g.yaml", shell_graph(marker))
    env = {"GRAPHRUNNER_DEFAULT_CAPABILITIES": "tool:echo", "GRAPHRUNNER_QUIET": "1"}
    denied = CliRunner().invoke(main, ["run", str(path), "--in-process", "--json"], env=env)
    assert denied.exit_code == 1, denied.output
    assert '"permission_denied"' in denied.stdout and not marker.exists()
    args = ["run", str(path), "--in-process", "--capability", "tool:echo", "--capability", "tool:shell"]
    allowed = CliRunner().invoke(main, args, env=env)
    assert allowed.exit_code == 0, allowed.output
    assert marker.exists()
    empty = CliRunner().invoke(main, ["run", str(path), "--in-process", "--capability", ""], env=env)
    assert empty.exit_code == 2 and "capability 0 must be a non-empty pattern" in empty.stderr


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        ("tool:shell", "capabilities must be a list of patterns"),
        (None, "got NoneType"),
        ({"tool:shell": True}, "got dict"),
        (["tool:echo", 3], "capability 1 must be a non-empty pattern"),
        (["tool:echo", None], "got NoneType None"),
        ([""], "got str ''"),
        (["tool:echo", " tool:shell"], "no surrounding spaces"),
        ([["tool:shell"]], "got list"),
    ],
)
def test_capabilities_that_are_not_a_list_of_strings_are_refused(bad: Any, expected: str) -> None:
    with pytest.raises(InvalidCapabilities) as info:
        checked(bad)
    assert expected in str(info.value)


def test_bad_capabilities_stop_an_in_process_run_before_anything_runs(
    run_yaml: Callable[..., RunResult], tmp_path: Path
) -> None:
    marker = tmp_path / "MARKER"
    with pytest.raises(InvalidCapabilities, match="write \\['tool:shell'\\]"):
        run_yaml(shell_graph(marker), capabilities="tool:shell")
    assert not marker.exists()
    assert checked(("tool:echo",)) == ("tool:echo",) and checked([]) == ()


def test_a_child_needing_a_capability_its_parent_lacks_is_denied(tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    write(tmp_path, "child.yaml", shell_graph(marker, "caps/child"))
    parent = write(
        tmp_path,
        "parent.yaml",
        """
        id: caps/parent
        config: {start: sub}
        nodes:
          sub: {type: subgraph, graph: caps/child}
        """,
    )
    result = load_graph(parent).invoke_sync(capabilities=["tool:echo", "graph:caps/*"])
    assert result.status == "failed"
    assert result.error is not None and result.error.type == "permission_denied"
    assert result.error.node == "sub"
    assert "tool 'shell' needs capability 'tool:shell'" in result.error.message
    assert not marker.exists()
    denied_graph = load_graph(parent).invoke_sync(capabilities=["tool:*"])
    assert denied_graph.error is not None and "'graph:caps/child'" in denied_graph.error.message


def test_a_graph_hook_the_run_may_not_dispatch_is_not_run(
    run_yaml: Callable[..., RunResult], caplog: pytest.LogCaptureFixture
) -> None:
    engine_targets.reset()
    text = """
        id: caps/hooks
        config:
          start: a
          hooks:
            - event: graph_started
              action: {tool: python, params: {fn: "engine_targets:count", args: {key: hook}}}
        nodes:
          a: {type: gate, assign: {v: 1}}
    """
    with caplog.at_level(logging.WARNING, logger="graphrunner.runner"):
        assert run_yaml(text, capabilities=["tool:echo"]).status == "completed"
    assert engine_targets.calls["hook"] == 0
    assert "needs capability 'tool:python'" in caplog.text
    assert run_yaml(text).status == "completed" and engine_targets.calls["hook"] == 1


def test_settings_read_default_capabilities_and_the_state_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GRAPHRUNNER_DEFAULT_CAPABILITIES", "GRAPHRUNNER_MAX_STATE_BYTES"):
        monkeypatch.delenv(name, raising=False)
    settings = Settings.from_env()
    # unset: a producer's run gets the pure built-ins, a local run everything
    assert settings.default_capabilities == ("tool:echo", "tool:fail", "tool:sleep")
    assert settings.local_capabilities == ("*",) and settings.max_state_bytes == 1_048_576
    monkeypatch.setenv("GRAPHRUNNER_DEFAULT_CAPABILITIES", " tool:echo ,tool:python:mypkg.*,, ")
    monkeypatch.setenv("GRAPHRUNNER_MAX_STATE_BYTES", "2048")
    settings = Settings.from_env()
    assert settings.default_capabilities == ("tool:echo", "tool:python:mypkg.*")
    assert settings.local_capabilities == settings.default_capabilities  # what an operator wrote holds
    assert settings.max_state_bytes == 2048
    monkeypatch.setenv("GRAPHRUNNER_DEFAULT_CAPABILITIES", "none")
    assert Settings.from_env().default_capabilities == () == Settings.from_env().local_capabilities
    for bad in ("0", "lots"):
        monkeypatch.setenv("GRAPHRUNNER_MAX_STATE_BYTES", bad)
        with pytest.raises(ValueError, match="GRAPHRUNNER_MAX_STATE_BYTES"):
            Settings.from_env()


# --- the state size limit -------------------------------------------------------------------------

GROWING = """
    id: limits/grow
    inputs: {text: {type: string, default: ""}}
    state: {log: {type: list, default: [], reducer: append}}
    config: {start: small}
    nodes:
      small: {type: gate, assign: {log: [small]}, next: big}
      big:
        action: {tool: echo, params: {text: "${inputs.text}"}}
        assign: {log: ["${result.text}", "${result.text}"]}  # twice the inputs
        next: after
      after: {type: gate, assign: {log: [after]}}
"""


def test_a_step_over_the_state_limit_fails_and_keeps_the_last_good_state(
    graph_of: Callable[[str], Graph],
) -> None:
    runner = LocalRunner(StepServices(max_state_bytes=1000))
    graph = graph_of(GROWING)
    result = asyncio.run(runner.invoke(graph, {"text": "x" * 600}))
    assert result.status == "failed"
    assert result.error is not None and result.error.type == "limit_exceeded"
    assert result.error.node == "big" and result.error.step == 2
    message = result.error.message
    assert "node 'big'" in message and "over the limit of 1000 bytes" in message
    assert "GRAPHRUNNER_MAX_STATE_BYTES" in message
    assert result.state == {"log": ["small"]}  # the oversized state was never kept
    assert result.path == ["small", "big"]
    assert isinstance(result.exception, LimitExceeded)
    small = asyncio.run(runner.invoke(graph, {"text": "x" * 10}))
    assert small.status == "completed"


def test_the_state_limit_comes_from_the_environment_in_process(
    graph_of: Callable[[str], Graph], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GRAPHRUNNER_MAX_STATE_BYTES", "1000")
    result = graph_of(GROWING).invoke_sync({"text": "y" * 600})
    assert result.error is not None and result.error.type == "limit_exceeded"
    assert result.state == {"log": ["small"]}
    with pytest.raises(
        LimitExceeded, match=r"the inputs of graph 'limits/grow' is .* over the limit of 1000"
    ):
        graph_of(GROWING).invoke_sync({"text": "z" * 2000})
    with pytest.raises(LimitExceeded, match="the initial state"):
        graph_of(GROWING).invoke_sync(state={"log": ["w" * 2000]})
