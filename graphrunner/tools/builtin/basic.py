"""Small built-in tools: `echo`, `fail` and `sleep`."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from graphrunner.errors import ToolError
from graphrunner.tools.base import Defer, ToolContext, parse_params


class EchoTool:
    """`echo`: returns (a deep copy of) its params; accepts anything."""

    name = "echo"
    version = "1"

    async def run(self, params: dict[str, Any], context: ToolContext) -> Any:
        """Return a copy of `params`."""
        return copy.deepcopy(dict(params))


class FailParams(BaseModel):
    """Params of `fail`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    message: str = "explicit failure"
    error_type: str = "Fail"
    transient: bool = False


class FailTool:
    """`fail`: always raises a ToolError with the given message, type and transience."""

    name = "fail"
    version = "1"

    async def run(self, params: dict[str, Any], context: ToolContext) -> Any:
        """Raise the requested ToolError."""
        p = parse_params(FailParams, params, self.name)
        raise ToolError(
            p.message,
            error_type=p.error_type,
            classification="transient" if p.transient else "permanent",
        )


class SleepParams(BaseModel):
    """Params of `sleep`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seconds: float = Field(ge=0, allow_inf_nan=False)


class SleepTool:
    """`sleep`: waits `seconds`; on a worker the step is rescheduled instead (durable, no slot held)."""

    name = "sleep"
    version = "1"

    async def run(self, params: dict[str, Any], context: ToolContext) -> Any:
        """Sleep, then return `{"slept": seconds}`."""
        p = parse_params(SleepParams, params, self.name)
        if context.durable and p.seconds > 0:
            raise Defer(p.seconds, {"slept": p.seconds})
        await asyncio.sleep(p.seconds)
        return {"slept": p.seconds}
