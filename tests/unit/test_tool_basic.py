"""The `echo`, `fail` and `sleep` tools, and the BUILTIN_TOOLS set."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from graphrunner.errors import ToolError
from graphrunner.tools.base import Tool, ToolContext
from graphrunner.tools.builtin import BUILTIN_TOOLS
from graphrunner.tools.builtin.basic import EchoTool, FailTool, SleepTool
from graphrunner.tools.registry import ToolRegistry

CONTEXT = ToolContext(run_id="r1", graph_id="g", node="n", step=1)


def run(tool: Tool, params: dict[str, Any]) -> Any:
    """Run `tool` to completion."""
    return asyncio.run(tool.run(params, CONTEXT))


def error_of(tool: Tool, params: dict[str, Any]) -> ToolError:
    """The ToolError `tool` raises for `params`."""
    with pytest.raises(ToolError) as info:
        run(tool, params)
    return info.value


def test_builtin_tools() -> None:
    registry = ToolRegistry(BUILTIN_TOOLS)
    assert registry.names() == ["echo", "fail", "http", "python", "shell", "sleep"]
    for tool in BUILTIN_TOOLS:
        assert isinstance(tool, Tool)
        assert tool.version == "1"


def test_echo_returns_a_copy_of_anything() -> None:
    params: dict[str, Any] = {"a": 1, "nested": {"list": [1, 2]}, "none": None}
    result = run(EchoTool(), params)
    assert result == params
    assert result is not params
    assert result["nested"] is not params["nested"]


def test_echo_of_nothing() -> None:
    assert run(EchoTool(), {}) == {}


def test_fail_defaults() -> None:
    err = error_of(FailTool(), {})
    assert (str(err), err.error_type, err.classification) == (
        "explicit failure",
        "Fail",
        "permanent",
    )


def test_fail_transient() -> None:
    err = error_of(FailTool(), {"message": "try again", "error_type": "Flaky", "transient": True})
    assert (str(err), err.error_type, err.classification) == ("try again", "Flaky", "transient")


@pytest.mark.parametrize("params", [{"transient": "maybe"}, {"bogus": 1}])
def test_fail_bad_params(params: dict[str, Any]) -> None:
    err = error_of(FailTool(), params)
    assert (err.error_type, err.classification) == ("InvalidParams", "validation")


def test_sleep() -> None:
    started = time.monotonic()
    assert run(SleepTool(), {"seconds": 0.05}) == {"slept": 0.05}
    assert time.monotonic() - started >= 0.05


def test_sleep_zero() -> None:
    assert run(SleepTool(), {"seconds": 0}) == {"slept": 0}


@pytest.mark.parametrize("params", [{}, {"seconds": -1}, {"seconds": "soon"}, {"seconds": 1, "x": 2}])
def test_sleep_bad_params(params: dict[str, Any]) -> None:
    err = error_of(SleepTool(), params)
    assert (err.error_type, err.classification) == ("InvalidParams", "validation")
    assert "sleep" in str(err)
