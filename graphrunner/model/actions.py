"""Actions (`{tool, params}`, and Rye's `{primary, item_type, item_id}` form) and retry policies."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from graphrunner.model.base import Model

RYE_KEYS = ("primary", "item_type", "item_id")
RYE_KINDS = ("tool", "directive")  # the kinds an action may execute; `kind:` prefixes an item_id
DIRECTIVE = "directive:"  # a directive is looked up as the tool `directive:<id>`


class Action(Model):
    """Dispatch tool `tool` with `params` (interpolated, then nulls dropped)."""

    tool: str = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _rye_form(cls, data: Any) -> Any:
        """Rye's `{primary: execute, item_type: tool, item_id: X, params}` means `{tool: X}`;
        `item_id: "tool:X"` names the kind in the id, and a directive is the tool `directive:X`."""
        if not isinstance(data, dict) or not any(k in data for k in RYE_KEYS):
            return data
        if "tool" in data:
            raise ValueError("an action takes either 'tool' or Rye's 'item_id' form, not both")
        if data.get("primary", "execute") != "execute":
            raise ValueError(
                f"Rye primary {data.get('primary')!r} is not supported: an action executes a tool "
                "(primary: execute); fetch and sign have no meaning in graphrunner"
            )
        rest = {k: v for k, v in data.items() if k not in RYE_KEYS}
        return {"tool": rye_tool_name(data.get("item_type", "tool"), data.get("item_id")), **rest}


def rye_tool_name(item_type: Any, item_id: Any) -> Any:
    """The tool name of a Rye `item_type` and `item_id` (which may carry a `kind:` prefix)."""
    if not isinstance(item_id, str):
        return item_id  # the model reports the wrong type
    kind, sep, rest = item_id.partition(":")
    if sep and "/" not in kind:
        if kind not in RYE_KINDS:
            raise ValueError(
                f"unknown kind prefix '{kind}:' in item_id {item_id!r}; a Rye action executes "
                f"{' or '.join(k + ':' for k in RYE_KINDS)}"
            )
        item_type, item_id = kind, rest
    if item_type not in RYE_KINDS:
        raise ValueError(f"Rye item_type {item_type!r} cannot be executed here; use {' or '.join(RYE_KINDS)}")
    return DIRECTIVE + item_id if item_type == "directive" else item_id


class RetryPolicy(Model):
    """Retry an action whose error matches `on` (a classification or an `error_type`)."""

    max_attempts: int = Field(default=3, ge=1, le=100)
    initial: float = Field(default=0.5, ge=0)
    multiplier: float = Field(default=2.0, ge=1)
    max_delay: float = Field(default=30.0, ge=0)
    jitter: float = Field(default=1.0, ge=0)
    on: tuple[str, ...] = ("transient", "timeout")

    def matches(self, classification: str, error_type: str | None) -> bool:
        """True when this policy applies to an error of that class or type."""
        return classification in self.on or (error_type is not None and error_type in self.on)


DEFAULT_RETRY = (RetryPolicy(),)
