"""The whole graph document: id, inputs, state, config (start, limits, hooks) and nodes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from graphrunner.model.actions import Action
from graphrunner.model.base import NODE_NAME, Model
from graphrunner.model.conditions import Condition
from graphrunner.model.nodes import ErrorMode, Node
from graphrunner.model.schedules import SCHEDULE_NAME, ScheduleSpec
from graphrunner.model.state import InputField, StateField

HookEvent = Literal["graph_started", "after_step", "error", "limit", "graph_completed"]
NonFinite = Literal["fail", "null"]  # what a NaN or ±Infinity made in a run does: docs/graph-language.md
Dialect = Literal["graphrunner", "rye"]  # whose semantics a graph runs with: see docs/running-rye-graphs.md


class Hook(Model):
    """Dispatch `action` on `event` when `when` holds; error hooks may answer control flow."""

    event: HookEvent
    when: Condition | None = None
    action: Action


class GraphConfig(Model):
    """Run-wide settings: the entry node, limits, the default error mode, hooks."""

    start: str | None = None
    max_steps: int = Field(default=1000, ge=1)
    max_depth: int = Field(default=5, ge=1)
    error_mode: ErrorMode = "fail"
    non_finite: NonFinite = "fail"  # NaN or ±Infinity made in a run: fail the step, or write null
    env_requires: tuple[str, ...] = ()
    hooks: tuple[Hook, ...] = ()
    schedules: dict[str, ScheduleSpec] = Field(default_factory=dict)  # by name (docs/schedules.md)

    @field_validator("schedules")
    @classmethod
    def _schedule_names(cls, value: dict[str, ScheduleSpec]) -> dict[str, ScheduleSpec]:
        for name in value:
            if not SCHEDULE_NAME.match(name):
                raise ValueError(
                    f"schedule name {name!r:.80}: use 1-64 letters, digits, '_', '.' or '-', "
                    "starting with a letter or digit"
                )
        return value


class GraphSpec(Model):
    """A graph document as written, after its forms are normalised."""

    id: str = Field(min_length=1)
    version: str | None = None
    description: str | None = None
    inputs: dict[str, InputField] = Field(default_factory=dict)
    state: dict[str, StateField] = Field(default_factory=dict)
    config: GraphConfig = GraphConfig()
    nodes: dict[str, Node] = Field(min_length=1)
    dialect: Dialect = "graphrunner"  # "rye" for a Rye graph file: set by the loader, never written
    permissions: tuple[str, ...] | None = None  # a Rye file's capabilities (rye.<primary>.<type>.<id>)

    @property
    def rye(self) -> bool:
        """True for a graph loaded from a Rye graph file: it runs with the walker's semantics."""
        return self.dialect == "rye"

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int | float) else value

    @field_validator("nodes", mode="before")
    @classmethod
    def _rye_node_type(cls, value: Any) -> Any:
        """Rye's `node_type:` means `type:`."""
        if not isinstance(value, dict):
            return value
        return {name: _rename_node_type(node) for name, node in value.items()}

    @field_validator("nodes")
    @classmethod
    def _node_names(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name in value:
            if not NODE_NAME.match(name):
                raise PydanticCustomError(
                    "bad_node_name",
                    "node name '{name}' must match {pattern} ('$end' is reserved)",
                    {"name": name, "pattern": NODE_NAME.pattern},
                )
        return value

    @model_validator(mode="before")
    @classmethod
    def _inputs_and_state_shorthand(cls, data: Any) -> Any:
        """`state: {x: list}` is short for `state: {x: {type: list}}`; likewise inputs."""
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for section in ("inputs", "state"):
            fields = out.get(section)
            if isinstance(fields, dict):
                out[section] = {
                    k: ({"type": v} if isinstance(v, str) else ({} if v is None else v))
                    for k, v in fields.items()
                }
        return out


def _rename_node_type(node: Any) -> Any:
    if not isinstance(node, dict) or "node_type" not in node:
        return node
    if "type" in node:
        raise ValueError("a node takes 'type' or Rye's 'node_type', not both")
    renamed = dict(node)
    renamed["type"] = renamed.pop("node_type")
    return renamed
