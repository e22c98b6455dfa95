"""Rye tool ids: the `rye/bash/bash` and control adapters (real subprocesses), and Rye aliases."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import graphrunner
from graphrunner.errors import ConfigurationError, ToolError, UnknownTool
from graphrunner.tools import registry as registry_module
from graphrunner.tools.base import Tool, ToolContext
from graphrunner.tools.builtin import BUILTIN_TOOLS, RYE_TOOLS
from graphrunner.tools.builtin.basic import EchoTool
from graphrunner.tools.builtin.rye_tools import MAX_OUTPUT_BYTES, RyeBashTool, RyeControlTool
from graphrunner.tools.registry import (
    ToolRegistry,
    apply_rye_mapping,
    default_registry,
    is_builtin,
    register_rye_alias,
)

CONTEXT = ToolContext(run_id="r1", graph_id="g", node="n", step=1)


def run(tool: Tool, params: dict[str, Any]) -> Any:
    """Run `tool` to completion."""
    return asyncio.run(tool.run(params, CONTEXT))


def bash(params: dict[str, Any]) -> Any:
    """Run the Rye bash adapter."""
    return run(RyeBashTool(), params)


def fresh() -> ToolRegistry:
    """A registry as the default one starts: built-ins and Rye adapters."""
    return ToolRegistry((*BUILTIN_TOOLS, *RYE_TOOLS))


class Mine:
    """A team's tool that serves Rye ids."""

    name = "fs_write"
    version = "1"
    rye_ids = ("rye/file-system/write", "directive:rye/file-system/save")

    async def run(self, params: dict[str, Any], context: ToolContext) -> Any:
        return {"wrote": params}


# --- rye/bash/bash ---------------------------------------------------------------------


def test_bash_success() -> None:
    result = bash({"command": "echo hello"})
    assert result == {
        "success": True,
        "output": "hello\n",
        "stdout": "hello\n",
        "stderr": "",
        "exit_code": 0,
        "truncated": False,
    }


def test_bash_non_zero_exit_is_a_result_not_an_error() -> None:
    result = bash({"command": "exit 3"})
    assert result["success"] is False
    assert result["exit_code"] == 3
    assert result["output"] == ""


def test_bash_stderr_in_output() -> None:
    result = bash({"command": "echo out; echo err >&2"})
    assert result["output"] == "out\n\n[stderr]\nerr\n"
    assert result["stderr"] == "err\n"
    only_err = bash({"command": "echo err >&2; exit 1"})
    assert only_err["output"] == "[stderr]\nerr\n"
    assert only_err["success"] is False


def test_bash_truncates_each_stream() -> None:
    size = MAX_OUTPUT_BYTES + 100
    result = bash({"command": f"head -c {size} /dev/zero | tr '\\0' x"})
    assert result["truncated"] is True
    assert result["stdout"] == "x" * MAX_OUTPUT_BYTES + f"\n... [output truncated, {size} bytes total]"
    assert result["success"] is True


def test_bash_timeout_kills_and_reports() -> None:
    result = bash({"command": "sleep 30", "timeout": 1})
    assert result == {"success": False, "error": "Command timed out after 1 seconds", "timeout": 1}


def test_bash_working_dir(tmp_path: Path) -> None:
    (tmp_path / "marker.txt").write_text("")
    result = bash({"command": "ls", "working_dir": str(tmp_path)})
    assert result["stdout"] == "marker.txt\n"


def test_bash_missing_working_dir(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    result = bash({"command": "true", "working_dir": str(missing)})
    assert result == {"success": False, "error": f"Working directory not found: {missing}"}


@pytest.mark.parametrize("params", [{}, {"command": 5}, {"command": ["echo"]}])
def test_bash_command_is_a_required_string(params: dict[str, Any]) -> None:
    with pytest.raises(ToolError) as info:
        bash(params)
    assert info.value.classification == "validation"
    assert "command" in str(info.value)


# --- control ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "answer"),
    [
        ({"action": "retry"}, {"control": "retry"}),
        ({"action": "fail"}, {"control": "fail", "error": "Hook triggered failure"}),
        ({"action": "abort", "error": "stop"}, {"control": "fail", "error": "stop"}),
        ({"action": "suspend"}, {"control": "fail", "error": "Hook triggered failure"}),
        ({"action": "escalate"}, {"control": "fail", "error": "Hook triggered failure"}),
        ({"action": "continue"}, None),
        ({"action": "skip"}, None),
    ],
)
def test_control_answers(params: dict[str, Any], answer: Any) -> None:
    assert run(RyeControlTool(), params) == answer


@pytest.mark.parametrize("params", [{}, {"action": "explode"}, {"action": 1}])
def test_control_bad_action(params: dict[str, Any]) -> None:
    with pytest.raises(ToolError) as info:
        run(RyeControlTool(), params)
    assert info.value.classification == "validation"
    assert "action" in str(info.value)


# --- aliases ---------------------------------------------------------------------------


def test_rye_bash_is_reachable_by_both_ids() -> None:
    registry = fresh()
    assert registry.get("rye/bash") is registry.get("rye/bash/bash")
    assert "rye/bash" in registry
    assert {"rye/bash", "rye/bash/bash", "rye/agent/threads/internal/control"} <= set(registry.names())
    assert not is_builtin("rye/bash") and not is_builtin("rye/bash/bash")
    assert all(is_builtin(name) for name in ("python", "shell", "http", "echo", "fail", "sleep"))


def test_alias_resolves_in_get_contains_names() -> None:
    registry = fresh()
    registry.alias("rye/web/fetch", "http")
    assert registry.get("rye/web/fetch") is registry.get("http")
    assert "rye/web/fetch" in registry
    assert "rye/web/other" not in registry
    assert registry.names() == sorted(registry.names())
    assert "rye/web/fetch" in registry.names()
    registry.alias("rye/web/fetch", "http")  # the same again is fine
    registry.alias("rye/bash/sh", "rye/bash")  # an alias's tool
    assert registry.get("rye/bash/sh") is registry.get("rye/bash/bash")


def test_unknown_tool_lists_tools() -> None:
    with pytest.raises(UnknownTool, match=r"unknown tool 'rye/x'; registered tools: .*shell"):
        fresh().get("rye/x")


def test_tool_rye_ids_are_aliased() -> None:
    registry = fresh()
    registry.register(Mine())
    assert registry.get("rye/file-system/write").name == "fs_write"
    assert registry.get("directive:rye/file-system/save").name == "fs_write"
    registry.register(Mine())  # replacing it keeps its aliases


@pytest.mark.parametrize(
    ("rye_id", "tool", "message"),
    [
        ("shell", "echo", "collides with the built-in tool 'shell'"),
        ("rye/x", "nope", "no tool 'nope' is registered; registered tools: echo"),
        ("tool:rye/bash", "echo", "write it without the prefix: 'rye/bash'"),
        ("knowledge:rye/x", "echo", "kind prefix 'knowledge:'"),
        ("directive:tool:rye/x", "echo", "kind prefix 'tool:'"),
        ("directive:", "echo", "not a non-empty string"),
        ("", "echo", "not a non-empty string"),
        ("rye/a b", "echo", "whitespace"),
        ("rye/bash", "echo", "already names the tool 'rye/bash/bash'"),
        ("rye/bash/bash", "echo", "is the name of a registered tool"),
    ],
)
def test_alias_refusals(rye_id: str, tool: str, message: str) -> None:
    registry = fresh()
    with pytest.raises(ConfigurationError) as info:
        registry.alias(rye_id, tool)
    assert message in str(info.value)
    assert tool in str(info.value)


def test_rye_ids_get_the_same_checks() -> None:
    class Bad(EchoTool):
        name = "bad"
        rye_ids = ("http",)

    registry = fresh()
    with pytest.raises(ConfigurationError, match="collides with the built-in tool 'http'"):
        registry.register(Bad())
    assert "bad" not in registry  # nothing half-registered


# --- GRAPHRUNNER_RYE_TOOLS ---------------------------------------------------------------


def test_mapping_applies_pairs() -> None:
    registry = fresh()
    apply_rye_mapping(registry, " rye/web/fetch=http , rye/core/echo = echo,")
    assert registry.get("rye/web/fetch").name == "http"
    assert registry.get("rye/core/echo").name == "echo"
    apply_rye_mapping(registry, "")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rye/web/fetch", "bad pair 'rye/web/fetch'"),
        ("=http", "bad pair '=http'"),
        ("rye/x=", "bad pair 'rye/x='"),
        ("rye/x=a=b", "bad pair 'rye/x=a=b'"),
        ("rye/x=echo,shell=echo", "pair 'shell=echo': "),
        ("rye/x=nope", "no tool 'nope' is registered"),
    ],
)
def test_mapping_refuses_bad_pairs(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        apply_rye_mapping(fresh(), text)
    assert str(info.value).startswith("GRAPHRUNNER_RYE_TOOLS: ")
    assert message in str(info.value)


def test_env_var_reaches_default_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_module, "_default", None)
    monkeypatch.setenv("GRAPHRUNNER_RYE_TOOLS", "rye/web/fetch=http")
    assert default_registry().get("rye/web/fetch").name == "http"
    register_rye_alias("rye/core/echo", "echo")
    assert default_registry().get("rye/core/echo").name == "echo"


def test_bad_env_var_fails_default_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_module, "_default", None)
    monkeypatch.setenv("GRAPHRUNNER_RYE_TOOLS", "rye/web/fetch:http")
    with pytest.raises(ConfigurationError, match="GRAPHRUNNER_RYE_TOOLS: bad pair"):
        default_registry()


def test_exported_from_the_package() -> None:
    assert graphrunner.register_rye_alias is register_rye_alias
