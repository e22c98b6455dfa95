"""Rye tools with one clear meaning here: `rye/bash/bash` and the hook control tool.

Each returns what the Rye tool returns, so a Rye graph reads the same result under graphrunner.
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictStr, field_validator

from graphrunner.tools.base import ToolContext, parse_params
from graphrunner.tools.builtin.shell import _kill_group

MAX_OUTPUT_BYTES = 51200  # of stdout and of stderr each, as the Rye bash tool keeps
DEFAULT_TIMEOUT = 120


class BashParams(BaseModel):
    """Params of `rye/bash/bash`; other keys are ignored, as the Rye tool ignores them."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    command: StrictStr
    timeout: int | float = DEFAULT_TIMEOUT
    working_dir: StrictStr | None = None

    @field_validator("timeout", mode="before")
    @classmethod
    def _positive(cls, value: Any) -> Any:
        """A timeout is a positive, finite number of seconds (an int stays an int)."""
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or value <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {value!r}")
        return value


class RyeBashTool:
    """`rye/bash/bash` (also `rye/bash`): the Rye bash tool, run through `/bin/sh -c` in the
    same minimal environment as `shell` (`ToolPolicy.child_env`).

    Returns `{success, output, stdout, stderr, exit_code, truncated}`; a non-zero exit is
    `success: false`, never an exception. A missing working directory or a timeout is
    `{success: false, error}` (a timeout also has `timeout`, and kills the command's group).
    """

    name = "rye/bash/bash"
    version = "1.0.0"
    rye_ids = ("rye/bash",)

    async def run(self, params: dict[str, Any], context: ToolContext) -> Any:
        """Run the command and return the Rye bash tool's result."""
        p = parse_params(BashParams, params, self.name)
        cwd = Path(p.working_dir).resolve() if p.working_dir else None
        if cwd is not None and not cwd.exists():
            return {"success": False, "error": f"Working directory not found: {cwd}"}
        try:
            proc = await asyncio.create_subprocess_exec(
                "/bin/sh",
                "-c",
                p.command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=None if cwd is None else str(cwd),
                env=context.policy.child_env(),
                start_new_session=True,
            )
        except OSError as exc:  # e.g. working_dir is a file
            return {"success": False, "error": str(exc)}
        finished = False
        try:
            out, err = await asyncio.wait_for(proc.communicate(), p.timeout)
            finished = True
        except TimeoutError:
            return {
                "success": False,
                "error": f"Command timed out after {p.timeout} seconds",
                "timeout": p.timeout,
            }
        finally:
            if not finished:  # timed out, or cancelled (the node's own timeout)
                await _kill_group(proc)
        return bash_result(proc.returncode, out, err)


def bash_result(exit_code: int | None, out: bytes, err: bytes) -> dict[str, Any]:
    """The Rye bash tool's result for a finished command."""
    stdout, out_cut = truncate_output(_text(out))
    stderr, err_cut = truncate_output(_text(err))
    parts = [stdout] if stdout else []
    if stderr:
        parts.append(f"[stderr]\n{stderr}")
    return {
        "success": exit_code == 0,
        "output": "\n".join(parts),
        "stdout": stdout,
        "stderr": stderr,
        "exit_code": exit_code,
        "truncated": out_cut or err_cut,
    }


def _text(data: bytes) -> str:
    """Output as text, newlines made `\\n` (as Python's text mode reads them)."""
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def truncate_output(text: str, max_bytes: int = MAX_OUTPUT_BYTES) -> tuple[str, bool]:
    """`text` cut to `max_bytes` of UTF-8 with a note of the full size, and whether it was cut."""
    encoded = text.encode("utf-8", errors="replace")
    if len(encoded) <= max_bytes:
        return text, False
    head = encoded[:max_bytes].decode("utf-8", errors="replace")
    return f"{head}\n... [output truncated, {len(encoded)} bytes total]", True


CONTROL_ACTIONS = ("retry", "fail", "abort", "continue", "skip", "escalate", "suspend")


class ControlParams(BaseModel):
    """Params of the Rye control tool: `action`, and for a failure an optional `error`."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    action: StrictStr

    @field_validator("action")
    @classmethod
    def _known(cls, value: str) -> str:
        """One of the Rye control actions."""
        if value not in CONTROL_ACTIONS:
            raise ValueError(f"unknown action {value!r}; use one of {', '.join(CONTROL_ACTIONS)}")
        return value


class RyeControlTool:
    """`rye/agent/threads/internal/control`: a Rye hook's control answer, in graphrunner's form.

    `retry` is `{"control": "retry"}`; `fail`, `abort`, `suspend` and `escalate` are
    `{"control": "fail", "error": ...}`; `continue` and `skip` answer nothing (None), so the
    default error handling applies, as under the Rye walker.
    """

    name = "rye/agent/threads/internal/control"
    version = "1.0.0"

    async def run(self, params: dict[str, Any], context: ToolContext) -> Any:
        """The hook answer for `params["action"]`."""
        action = parse_params(ControlParams, params, self.name).action
        if action == "retry":
            return {"control": "retry"}
        if action in ("continue", "skip"):
            return None
        return {"control": "fail", "error": params.get("error", "Hook triggered failure")}
