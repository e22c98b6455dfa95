"""What a tool is: an async callable of `(params, context)` with a name and a version."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ValidationError

from graphrunner.errors import ToolError
from graphrunner.tools.policy import DEFAULT_POLICY, ToolPolicy


@dataclass(frozen=True)
class ToolContext:
    """Who is calling: run, graph, node, step and attempt, the node's timeout, and the
    deployment's boundaries for tools (`policy`: what started processes and `http` may reach)."""

    run_id: str
    graph_id: str
    node: str
    step: int
    attempt: int = 1
    timeout: float | None = None
    item_index: int | None = None
    durable: bool = False  # on a worker: a tool may `raise Defer(...)` instead of sleeping
    policy: ToolPolicy = DEFAULT_POLICY

    @property
    def idempotency_key(self) -> str:
        """A key that is the same for every attempt of this step (and foreach item)."""
        item = "" if self.item_index is None else f":{self.item_index}"
        return f"{self.run_id}:{self.step}{item}"


class Defer(Exception):
    """Raised by a tool (when `context.durable`) to finish after `seconds` without holding a worker.

    The step is suspended and rescheduled; when it comes due, `result` is the tool's result.
    """

    def __init__(self, seconds: float, result: Any) -> None:
        super().__init__(f"defer {seconds:g}s")
        self.seconds = seconds
        self.result = result


@runtime_checkable
class Tool(Protocol):
    """A tool: `await tool.run(params, context)` returns the result or raises `ToolError`."""

    name: str
    version: str

    async def run(self, params: dict[str, Any], context: ToolContext) -> Any: ...


M = TypeVar("M", bound=BaseModel)


def effective_timeout(*timeouts: float | None) -> float | None:
    """The smallest of the timeouts that are set (a param's and the node's), or None."""
    given = [t for t in timeouts if t is not None]
    return min(given) if given else None


def parse_params(model: type[M], params: dict[str, Any], tool: str) -> M:
    """Validate a tool's params; a bad one is a `validation` ToolError naming the param."""
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(params)'}: {e['msg']}" for e in exc.errors()
        )
        raise ToolError(
            f"tool '{tool}' got bad params: {problems}",
            error_type="InvalidParams",
            classification="validation",
        ) from None
