"""The `python` tool: sync and async calls, error classification, bad params."""

from __future__ import annotations

import asyncio
import errno
import time
from pathlib import Path
from typing import Any

import pytest
import tool_targets

from graphrunner.errors import ToolError
from graphrunner.tools.base import ToolContext
from graphrunner.tools.builtin.python_tool import PythonTool

CONTEXT = ToolContext(run_id="r1", graph_id="g", node="n", step=1)
MOD = tool_targets.__name__


def run(params: dict[str, Any]) -> Any:
    """Run the tool to completion."""
    return asyncio.run(PythonTool().run(params, CONTEXT))


def error_of(params: dict[str, Any]) -> ToolError:
    """The ToolError the tool raises for `params`."""
    with pytest.raises(ToolError) as info:
        run(params)
    return info.value


def test_sync_function() -> None:
    assert run({"fn": f"{MOD}:add", "args": {"a": 2, "b": 3}}) == 5


def test_args_default_to_empty() -> None:
    assert run({"fn": f"{MOD}:sentinel"}) is tool_targets.SENTINEL


def test_async_function() -> None:
    assert run({"fn": f"{MOD}:async_add", "args": {"a": 2}}) == 3


def test_stdlib_function() -> None:
    assert run({"fn": "os.path:join", "args": {"a": "x"}}) == "x"


def test_value_error_is_permanent() -> None:
    ref = f"{MOD}:raise_value_error"
    err = error_of({"fn": ref, "args": {"text": "nope"}})
    assert err.classification == "permanent"
    assert err.error_type == "ValueError"
    assert str(err) == f"{ref}: ValueError: nope"
    assert isinstance(err.__cause__, ValueError)


def test_connection_error_is_transient() -> None:
    err = error_of({"fn": f"{MOD}:raise_connection_error"})
    assert err.classification == "transient"
    assert err.error_type == "ConnectionRefusedError"


def test_timeout_error_is_transient() -> None:
    err = error_of({"fn": f"{MOD}:raise_timeout_error"})
    assert (err.classification, err.error_type) == ("transient", "TimeoutError")


def test_os_error_network_unreachable_is_transient() -> None:
    err = error_of({"fn": f"{MOD}:raise_os_error", "args": {"code": errno.ENETUNREACH}})
    assert (err.classification, err.error_type) == ("transient", "OSError")


def test_os_error_file_not_found_is_permanent() -> None:
    err = error_of({"fn": f"{MOD}:raise_os_error", "args": {"code": errno.ENOENT}})
    assert (err.classification, err.error_type) == ("permanent", "FileNotFoundError")


def test_tool_error_passes_through() -> None:
    err = error_of({"fn": f"{MOD}:raise_tool_error"})
    assert (err.classification, err.error_type, str(err)) == ("permission_denied", "Custom", "mine")
    assert err.__cause__ is None


@pytest.mark.parametrize(
    "ref",
    [f"{MOD}:missing", "no_such_module_xyz:fn", "not a reference", f"{MOD}:NOT_CALLABLE"],
)
def test_bad_reference_is_validation(ref: str) -> None:
    err = error_of({"fn": ref})
    assert (err.classification, err.error_type) == ("validation", "ImportFailed")


def test_args_not_fitting_the_signature_is_validation() -> None:
    err = error_of({"fn": f"{MOD}:add", "args": {"c": 1}})
    assert (err.classification, err.error_type) == ("validation", "InvalidParams")
    assert "add" in str(err)


@pytest.mark.parametrize(
    "params",
    [{}, {"fn": f"{MOD}:add", "extra": 1}, {"fn": f"{MOD}:add", "args": [1, 2]}],
)
def test_bad_params_are_validation(params: dict[str, Any]) -> None:
    err = error_of(params)
    assert (err.classification, err.error_type) == ("validation", "InvalidParams")


def test_slow_sync_function_can_be_abandoned_by_a_timeout() -> None:
    async def main() -> float:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(
                PythonTool().run({"fn": f"{MOD}:slow", "args": {"seconds": 0.5}}, CONTEXT), 0.05
            )
        return time.monotonic() - started

    assert asyncio.run(main()) < 0.3


def test_slow_async_function_is_cancelled_by_a_timeout() -> None:
    async def main() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(
                PythonTool().run({"fn": f"{MOD}:async_slow", "args": {"seconds": 5}}, CONTEXT),
                0.05,
            )

    asyncio.run(main())


# -- a reference names the module that defines the callable (DESIGN §2.8) -------------------


def test_a_callable_the_module_imported_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "made"
    err = error_of({"fn": "graphrunner.settings:os.mkdir", "args": {"path": str(target)}})
    assert (err.classification, err.error_type) == ("validation", "ForeignCallable")
    message = str(err)
    assert "'graphrunner.settings:os.mkdir'" in message
    assert "module 'posix'" in message
    assert "reference 'posix:mkdir' instead" in message
    assert not target.exists()


@pytest.mark.parametrize(
    ("ref", "defined_in"),
    [
        (f"{MOD}:basename", "posixpath"),
        (f"{MOD}:asyncio.sleep", "asyncio.tasks"),
        (f"{MOD}:ADD_TEN", "functools"),
    ],
)
def test_imported_names_and_partials_are_refused(ref: str, defined_in: str) -> None:
    err = error_of({"fn": ref})
    assert err.error_type == "ForeignCallable"
    assert f"module '{defined_in}'" in str(err)


def test_a_builtin_method_without_a_module_is_refused() -> None:
    err = error_of({"fn": f"{MOD}:SENTINEL.get", "args": {"key": "the"}})
    assert err.error_type == "ForeignCallable"
    assert "names no module" in str(err)


@pytest.mark.parametrize(
    "ref", [f"{MOD}:add.__globals__", f"{MOD}:Greeter.__subclasses__", f"{MOD}:Greeter.__init__"]
)
def test_special_attributes_are_refused(ref: str) -> None:
    err = error_of({"fn": ref})
    assert (err.classification, err.error_type) == ("validation", "ImportFailed")
    assert "special attribute" in str(err)


def test_callables_defined_under_the_module_are_admitted() -> None:
    assert run({"fn": f"{MOD}:Greeter.kind"}) == "Greeter"
    assert run({"fn": "graphrunner:settings.is_cluster_url", "args": {"url": "redis+cluster://h"}}) is True
