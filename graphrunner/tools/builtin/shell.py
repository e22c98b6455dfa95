"""The `shell` tool: run a command (argv, or a shell line with `shell: true`).

The process starts from a minimal environment (`ToolPolicy.child_env`): PATH, HOME, TMPDIR,
the locale and TZ, the worker variables `GRAPHRUNNER_SHELL_ENV_ALLOW` names, and the node's
`env`. Worker secrets (Redis and broker URLs, logins) never reach it unless allowed by name.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from graphrunner.errors import ToolError
from graphrunner.tools.base import ToolContext, effective_timeout, parse_params
from graphrunner.tools.policy import ToolPolicy

STDERR_TAIL = 500


class ShellParams(BaseModel):
    """Params of `shell`: exactly one of `argv` or `command` (the latter with `shell: true`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    argv: list[str] | None = None
    command: str | None = None
    shell: bool = False
    cwd: str | None = None
    env: dict[str, str] | None = None
    timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    check: bool = True
    input: str | None = None

    @field_validator("argv", mode="before")
    @classmethod
    def _argv_as_strings(cls, value: Any) -> Any:
        """Numbers in argv become strings; anything else that is not a string is an error."""
        if not isinstance(value, list):
            return value
        return [_arg_text(i, item) for i, item in enumerate(value)]

    @model_validator(mode="after")
    def _one_way_to_run(self) -> ShellParams:
        """Exactly one of argv / command; command only with `shell: true`."""
        if self.argv is not None and self.command is not None:
            raise ValueError("give either argv or command, not both")
        if self.argv is None and self.command is None:
            raise ValueError("give argv (a list of strings) or command with shell: true")
        if self.command is not None and not self.shell:
            raise ValueError("command runs through a shell: use argv: [...] instead, or write shell: true")
        if self.argv is not None and self.shell:
            raise ValueError("shell: true goes with command, not with argv")
        if self.argv == []:
            raise ValueError("argv must not be empty")
        return self

    def describe(self) -> str:
        """The command as one line of text, for messages."""
        text = shlex.join(self.argv) if self.argv is not None else str(self.command)
        return text if len(text) <= 200 else text[:197] + "..."


def _arg_text(index: int, item: Any) -> str:
    """One argv item as a string."""
    if isinstance(item, str):
        return item
    if isinstance(item, int | float) and not isinstance(item, bool):
        return str(item)
    raise ValueError(f"argv item {index} must be a string, got {type(item).__name__}")


class ShellTool:
    """`shell`: runs a process in its own session; a timeout kills its whole process group."""

    name = "shell"
    version = "1"

    async def run(self, params: dict[str, Any], context: ToolContext) -> Any:
        """Run the command; return exit code, output, success and duration."""
        p = parse_params(ShellParams, params, self.name)
        timeout = effective_timeout(p.timeout, context.timeout)
        started = time.monotonic()
        proc = await _spawn(p, context.policy)
        data = None if p.input is None else p.input.encode("utf-8")
        out, err = await _communicate(proc, data, timeout, p.describe())
        stderr = err.decode("utf-8", errors="replace")
        if p.check and proc.returncode != 0:
            raise _command_failed(p.describe(), proc.returncode, stderr)
        return {
            "exit_code": proc.returncode,
            "stdout": out.decode("utf-8", errors="replace"),
            "stderr": stderr,
            "success": proc.returncode == 0,
            "duration_ms": round((time.monotonic() - started) * 1000),
        }


async def _spawn(p: ShellParams, policy: ToolPolicy) -> asyncio.subprocess.Process:
    """Start the process in a new session, in the minimal environment of `policy` plus the
    node's `env`; a failure to start is a ToolError."""
    env = policy.child_env(p.env)
    options: dict[str, Any] = {
        "stdin": asyncio.subprocess.PIPE if p.input is not None else asyncio.subprocess.DEVNULL,
        "stdout": asyncio.subprocess.PIPE,
        "stderr": asyncio.subprocess.PIPE,
        "cwd": p.cwd,
        "env": env,
        "start_new_session": True,
    }
    try:
        if p.argv is not None:
            return await asyncio.create_subprocess_exec(*p.argv, **options)
        return await asyncio.create_subprocess_shell(str(p.command), **options)
    except OSError as exc:
        raise _spawn_failed(p, exc) from exc


def _spawn_failed(p: ShellParams, exc: OSError) -> ToolError:
    """The ToolError for a process that could not be started."""
    if p.cwd is not None and not os.path.isdir(p.cwd):
        message, kind = f"working directory {p.cwd!r} does not exist", "CwdNotFound"
    elif isinstance(exc, FileNotFoundError):
        message, kind = f"command not found: {p.describe()}", "CommandNotFound"
    else:
        message, kind = f"cannot start {p.describe()}: {exc}", type(exc).__name__
    return ToolError(f"tool 'shell': {message}", error_type=kind, classification="permanent")


async def _communicate(
    proc: asyncio.subprocess.Process, data: bytes | None, timeout: float | None, what: str
) -> tuple[bytes, bytes]:
    """Feed stdin, collect output; on timeout or cancellation kill the group and reap it."""
    finished = False
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(data), timeout)
        finished = True
    except TimeoutError:
        raise ToolError(
            f"tool 'shell': {what} timed out after {timeout:g} s",
            error_type="Timeout",
            classification="timeout",
        ) from None
    finally:
        if not finished:
            await _kill_group(proc)
    return stdout, stderr


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the process group led by `proc` (its children too), then reap `proc`."""
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
        os.killpg(proc.pid, signal.SIGKILL)
    await proc.wait()


def _command_failed(what: str, code: int | None, stderr: str) -> ToolError:
    """The ToolError for a non-zero exit under `check: true`."""
    how = f"exited with code {code}"
    if code is not None and code < 0:
        how += f" (killed by signal {-code})"
    tail = stderr[-STDERR_TAIL:].strip()
    detail = f": {tail}" if tail else " (no stderr)"
    return ToolError(
        f"tool 'shell': {what} {how}{detail}",
        error_type="CommandFailed",
        classification="permanent",
    )
