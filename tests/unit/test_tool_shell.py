"""The `shell` tool with real subprocesses: results, errors, timeouts, params."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from graphrunner import Graph
from graphrunner.errors import ToolError
from graphrunner.tools import ToolPolicy
from graphrunner.tools.base import ToolContext
from graphrunner.tools.builtin.rye_tools import RyeBashTool
from graphrunner.tools.builtin.shell import ShellTool

CONTEXT = ToolContext(run_id="r1", graph_id="g", node="n", step=1)


def run(params: dict[str, Any], context: ToolContext = CONTEXT) -> Any:
    """Run the tool to completion."""
    return asyncio.run(ShellTool().run(params, context))


def error_of(params: dict[str, Any], context: ToolContext = CONTEXT) -> ToolError:
    """The ToolError the tool raises for `params`."""
    with pytest.raises(ToolError) as info:
        run(params, context)
    return info.value


def is_gone(pid: int) -> bool:
    """True if no live process has `pid` (a zombie waiting for init counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def wait_gone(pid: int, within: float = 2.0) -> bool:
    """Poll until `pid` is gone (init may take a moment to reap it)."""
    deadline = time.monotonic() + within
    while not is_gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_argv_result_shape() -> None:
    result = run({"argv": ["echo", "hello"]})
    assert set(result) == {"exit_code", "stdout", "stderr", "success", "duration_ms"}
    assert result["exit_code"] == 0
    assert result["stdout"] == "hello\n"
    assert result["stderr"] == ""
    assert result["success"] is True
    assert isinstance(result["duration_ms"], int)
    assert result["duration_ms"] >= 0


def test_argv_is_not_interpreted_by_a_shell() -> None:
    assert run({"argv": ["echo", "$HOME", "a;b"]})["stdout"] == "$HOME a;b\n"


def test_argv_numbers_become_strings() -> None:
    assert run({"argv": ["echo", 1, 2.5]})["stdout"] == "1 2.5\n"


def test_command_with_shell_and_env() -> None:
    result = run(
        {
            "command": 'echo "$GR_TEST_VAR" | tr a-z A-Z',
            "shell": True,
            "env": {"GR_TEST_VAR": "abc"},
        }
    )
    assert result["stdout"] == "ABC\n"


def test_env_is_added_to_the_environment() -> None:
    result = run({"argv": ["sh", "-c", 'echo "$GR_TEST_VAR:$PATH"'], "env": {"GR_TEST_VAR": "x"}})
    assert result["stdout"] == f"x:{os.environ['PATH']}\n"


def test_cwd(tmp_path: Path) -> None:
    assert run({"argv": ["pwd"], "cwd": str(tmp_path)})["stdout"].strip() == str(tmp_path.resolve())


def test_missing_cwd(tmp_path: Path) -> None:
    err = error_of({"argv": ["pwd"], "cwd": str(tmp_path / "nope")})
    assert (err.classification, err.error_type) == ("permanent", "CwdNotFound")


def test_stdin_input() -> None:
    assert run({"argv": ["cat"], "input": "line one\nzwei ü\n"})["stdout"] == "line one\nzwei ü\n"


def test_no_input_means_empty_stdin() -> None:
    assert run({"argv": ["cat"], "timeout": 5})["stdout"] == ""


def test_check_false_returns_the_failure() -> None:
    result = run({"argv": ["sh", "-c", "echo out; echo oops >&2; exit 3"], "check": False})
    assert result["exit_code"] == 3
    assert result["success"] is False
    assert (result["stdout"], result["stderr"]) == ("out\n", "oops\n")


def test_check_true_raises_command_failed() -> None:
    err = error_of({"argv": ["sh", "-c", "echo oops >&2; exit 3"]})
    assert (err.classification, err.error_type) == ("permanent", "CommandFailed")
    assert "3" in str(err)
    assert "oops" in str(err)


def test_command_failed_keeps_the_tail_of_stderr() -> None:
    err = error_of({"argv": ["sh", "-c", "printf 'x%.0s' $(seq 2000) >&2; echo END >&2; exit 1"]})
    assert str(err).endswith("END")
    assert len(str(err)) < 800


def test_undecodable_output_is_replaced() -> None:
    assert run({"argv": ["printf", "a\\377b"]})["stdout"] == "a\ufffdb"


def test_missing_executable() -> None:
    err = error_of({"argv": ["/no/such/program-xyz", "arg"]})
    assert (err.classification, err.error_type) == ("permanent", "CommandNotFound")
    assert "program-xyz" in str(err)


def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    started = time.monotonic()
    err = error_of({"command": f"sleep 30 & echo $! > {pidfile}; wait", "shell": True, "timeout": 0.5})
    assert time.monotonic() - started < 5
    assert (err.classification, err.error_type) == ("timeout", "Timeout")
    assert "0.5" in str(err)
    assert "sleep 30" in str(err)
    assert wait_gone(int(pidfile.read_text()))


def test_context_timeout_applies_when_smaller() -> None:
    context = ToolContext(run_id="r1", graph_id="g", node="n", step=1, timeout=0.3)
    started = time.monotonic()
    err = error_of({"argv": ["sleep", "30"], "timeout": 20}, context)
    assert time.monotonic() - started < 5
    assert err.classification == "timeout"
    assert "0.3" in str(err)


def test_caller_cancellation_kills_the_process(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"

    async def main() -> None:
        with pytest.raises(TimeoutError):
            params = {"command": f"echo $$ > {pidfile}; exec sleep 30", "shell": True}
            await asyncio.wait_for(ShellTool().run(params, CONTEXT), 0.5)

    started = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - started < 5
    assert wait_gone(int(pidfile.read_text()))


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"argv": ["echo"], "command": "echo", "shell": True}, "not both"),
        ({"command": "echo hi"}, "shell: true"),
        ({}, "argv"),
        ({"argv": []}, "empty"),
        ({"argv": ["echo"], "shell": True}, "shell: true"),
        ({"argv": ["echo", {"a": 1}]}, "argv item 1"),
        ({"argv": ["echo", True]}, "argv item 1"),
        ({"argv": "echo hi"}, "argv"),
        ({"argv": ["echo"], "bogus": 1}, "bogus"),
        ({"argv": ["echo"], "timeout": 0}, "timeout"),
        ({"argv": ["echo"], "env": {"N": 1}}, "env"),
    ],
)
def test_bad_params_are_validation(params: dict[str, Any], needle: str) -> None:
    err = error_of(params)
    assert (err.classification, err.error_type) == ("validation", "InvalidParams")
    assert needle in str(err)


# -- a step starts from a minimal environment (DESIGN §7) -----------------------------------

WORKER_SECRETS = {
    "FLOWER_BASIC_AUTH": "admin:flower-secret",
    "GRAPHRUNNER_REDIS_URL": "redis://:redis-secret@cache:6379/0",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
}


def environment_of(output: str) -> dict[str, str]:
    """The variables `env -0` printed."""
    return dict(item.split("=", 1) for item in output.split("\0") if item)


@pytest.fixture
def worker_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker environment with secrets in it, a team's variables, and a locale."""
    for name, value in WORKER_SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TEAM_API_URL", "https://api.example")
    monkeypatch.setenv("TEAM_REGION", "eu")
    monkeypatch.setenv("LC_TIME", "C")


@pytest.mark.usefixtures("worker_env")
def test_worker_secrets_do_not_reach_a_step() -> None:
    seen = environment_of(run({"argv": ["env", "-0"]})["stdout"])
    assert seen["PATH"] == os.environ["PATH"]
    assert seen["LC_TIME"] == "C"
    assert not set(WORKER_SECRETS) & set(seen)
    assert "TEAM_API_URL" not in seen
    assert set(seen) <= {"PATH", "HOME", "TMPDIR", "LANG", "LANGUAGE", "TZ", "PWD", "SHLVL", "_"} | {
        name for name in seen if name.startswith("LC_")
    }


@pytest.mark.usefixtures("worker_env")
def test_allow_listed_worker_variables_and_the_node_env_reach_a_step() -> None:
    context = replace(CONTEXT, policy=ToolPolicy(shell_env_allow=("TEAM_*",)))
    params = {"command": "env -0", "shell": True, "env": {"TEAM_REGION": "us", "NODE_VAR": "n"}}
    seen = environment_of(run(params, context)["stdout"])
    assert (seen["TEAM_API_URL"], seen["TEAM_REGION"], seen["NODE_VAR"]) == ("https://api.example", "us", "n")
    assert not set(WORKER_SECRETS) & set(seen)


@pytest.mark.usefixtures("worker_env")
def test_the_rye_bash_tool_starts_from_the_same_environment() -> None:
    context = replace(CONTEXT, policy=ToolPolicy(shell_env_allow=("TEAM_API_URL",)))
    result = asyncio.run(RyeBashTool().run({"command": "env -0"}, context))
    seen = environment_of(result["stdout"])
    assert seen["TEAM_API_URL"] == "https://api.example"
    assert not {*WORKER_SECRETS, "TEAM_REGION"} & set(seen)


@pytest.mark.usefixtures("worker_env")
def test_a_run_gets_the_allow_list_of_its_settings(
    graph_of: Callable[[str], Graph], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GRAPHRUNNER_SHELL_ENV_ALLOW", "TEAM_REGION")
    graph = graph_of(
        """
        id: shell/env
        config: {start: look}
        state: {seen: {type: string}}
        nodes:
          look:
            action: {tool: shell, params: {command: 'echo "$TEAM_REGION/$FLOWER_BASIC_AUTH"', shell: true}}
            assign: {seen: "${result.stdout}"}
        """
    )
    result = graph.invoke_sync(capabilities=["tool:shell"])
    assert result.status == "completed", result.error
    assert result.state["seen"] == "eu/\n"
