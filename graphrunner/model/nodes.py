"""Node types: action (default), gate, foreach, subgraph, parallel, pause and return."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from graphrunner.model.actions import Action, RetryPolicy
from graphrunner.model.base import NODE_NAME, Model
from graphrunner.model.edges import Next

ErrorMode = Literal["fail", "continue"]
NODE_TYPES = ("action", "gate", "foreach", "subgraph", "parallel", "pause", "return")
ErrorPolicy = Literal["fail_fast", "collect"]
CHILD_ONLY = ("retry", "timeout", "queue", "cache_result", "batch_size")  # what a child run does not take
MAX_BATCH_SIZE = 1000  # items of one foreach item message at most
PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


class _Routed(Model):
    """What every routed node has: a description, `assign` and `next`."""

    description: str | None = None
    assign: dict[str, Any] = Field(default_factory=dict)
    next: Next | None = None


class _ErrorHandled(_Routed):
    """Nodes whose work can fail: recovery routing, error mode, result key."""

    on_error: str | None = None
    error_mode: ErrorMode | None = None
    result_key: str | None = None
    env_requires: tuple[str, ...] = ()


class _Dispatching(_ErrorHandled):
    """Nodes that dispatch a tool: retry, timeout, queue and result cache."""

    action: Action
    retry: tuple[RetryPolicy, ...] | None = None
    timeout: float | None = Field(default=None, gt=0)
    queue: str | None = None
    cache_result: bool = False

    @field_validator("retry", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        """`retry` is one policy or an ordered list of policies."""
        return [value] if isinstance(value, dict) else value


class ActionNode(_Dispatching):
    """Dispatch `action`, then `assign`, then route by `next`."""

    type: Literal["action"] = "action"
    assign_result: bool = False  # the result (a mapping) is also the update, key by key into state


class GateNode(_Routed):
    """No action: `assign` runs first, then `next` sees the updated state."""

    type: Literal["gate"]


class ForeachNode(_Dispatching):
    """Run `action` once per item of `over`, one after another or as a chord; or, with `graph`,
    one child run of that graph per item, its state projected in by `inputs`."""

    type: Literal["foreach"]
    action: Action | None = None  # type: ignore[assignment]
    graph: str | None = Field(default=None, min_length=1)
    inputs: dict[str, Any] | None = None
    over: Any
    as_: str = Field(default="item", alias="as", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    parallel: bool = False
    max_concurrency: int | None = Field(default=None, ge=1)
    batch_size: int | None = Field(default=None, ge=1, le=MAX_BATCH_SIZE, strict=True)  # items per task
    collect: str | None = None
    tolerated_failures: int | str = 0

    @field_validator("tolerated_failures")
    @classmethod
    def _count_or_percent(cls, value: int | str) -> int | str:
        if isinstance(value, int):
            if value < 0:
                raise ValueError("tolerated_failures must not be negative")
            return value
        match = PERCENT.match(value)
        if not match or float(match.group(1)) > 100:
            raise ValueError(f"tolerated_failures must be a count or a percentage like '10%', got {value!r}")
        return value

    @model_validator(mode="after")
    def _action_or_graph(self) -> ForeachNode:
        if (self.action is None) == (self.graph is None):
            raise ValueError(
                "a foreach runs either an action (action:) or a child graph per item (graph:), "
                + ("not both" if self.action is not None else "and names neither")
            )
        if self.graph is None and self.inputs is not None:
            raise ValueError("inputs: projects into a child graph; with action:, write the action's params")
        written = [k for k in CHILD_ONLY if k in self.model_fields_set] if self.graph is not None else []
        if written:
            raise ValueError(f"a foreach over a graph takes no {', '.join(written)} (those are an action's)")
        return self

    def tolerated(self, total: int) -> int:
        """How many failed items are tolerated out of `total`."""
        if isinstance(self.tolerated_failures, int):
            return self.tolerated_failures
        match = PERCENT.match(self.tolerated_failures)
        assert match is not None
        return int(total * float(match.group(1)) / 100)


class SubgraphNode(_ErrorHandled):
    """Run graph `graph` as a child run; state crosses by the projection rules."""

    type: Literal["subgraph"]
    graph: str = Field(min_length=1)
    inputs: dict[str, Any] | None = None
    outputs: dict[str, str] | None = None
    # narrow the child run (never widen): its capabilities, and how deep it may nest below itself
    capabilities: list[str] | None = None
    depth: int | None = Field(default=None, ge=0, strict=True)

    @field_validator("capabilities")
    @classmethod
    def _written_patterns(cls, value: list[str] | None) -> list[str] | None:
        bad = [p for p in value or () if "${" in p or not p.strip()]
        if bad:
            raise ValueError(f"capabilities are written patterns (no ${{...}}, none empty), got {bad[0]!r}")
        return value


class ParallelBranch(Model):
    """One branch of a parallel node: a child run of `graph`, projected as a subgraph is."""

    graph: str = Field(min_length=1)
    inputs: dict[str, Any] | None = None
    outputs: dict[str, str] | None = None


class ParallelNode(_ErrorHandled):
    """Run every branch at once as a child run; merge their contributions in branch order."""

    type: Literal["parallel"]
    branches: dict[str, ParallelBranch] = Field(min_length=1)  # declaration order is merge order
    error_policy: ErrorPolicy = "fail_fast"
    errors_field: str | None = None

    @field_validator("branches")
    @classmethod
    def _branch_names(cls, value: dict[str, ParallelBranch]) -> dict[str, ParallelBranch]:
        bad = [name for name in value if not NODE_NAME.match(name)]
        if bad:
            raise ValueError(f"branch name {bad[0]!r} must match {NODE_NAME.pattern}")
        return value

    @model_validator(mode="after")
    def _errors_field_with_collect(self) -> ParallelNode:
        if self.errors_field is not None and self.error_policy != "collect":
            raise ValueError("errors_field goes with error_policy: collect (fail_fast fails the node)")
        return self


class PauseNode(_Routed):
    """Park the run as `paused` until it is resumed; then route by `next`."""

    type: Literal["pause"]
    message: str | None = None


class ReturnNode(Model):
    """End the run; `output` is interpolated, or the whole state without it."""

    type: Literal["return"]
    description: str | None = None
    assign: dict[str, Any] = Field(default_factory=dict)
    output: Any = None


def node_tag(data: Any) -> str:
    """The node type of a raw mapping (`type`, Rye's `node_type`, default `action`)."""
    if isinstance(data, dict):
        return str(data.get("type") or "action")
    return str(getattr(data, "type", "action"))


Node = Annotated[
    Annotated[ActionNode, Tag("action")]
    | Annotated[GateNode, Tag("gate")]
    | Annotated[ForeachNode, Tag("foreach")]
    | Annotated[SubgraphNode, Tag("subgraph")]
    | Annotated[ParallelNode, Tag("parallel")]
    | Annotated[PauseNode, Tag("pause")]
    | Annotated[ReturnNode, Tag("return")],
    Discriminator(
        node_tag,
        custom_error_type="unknown_node_type",
        custom_error_message=f"unknown node type; use one of {', '.join(NODE_TYPES)}",
    ),
]
AnyNode = ActionNode | GateNode | ForeachNode | SubgraphNode | ParallelNode | PauseNode | ReturnNode
