"""Actions (`{tool, params}`, and Rye's `{primary, item_type, item_id}` form) and retry policies."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from graphrunner.model.base import Model

RYE_KEYS = ("primary", "item_type", "item_id")


class Action(Model):
    """Dispatch tool `tool` with `params` (interpolated, then nulls dropped)."""

    tool: str = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _rye_form(cls, data: Any) -> Any:
        """Rye's `{primary: execute, item_type: tool, item_id: X, params}` means `{tool: X}`."""
        if not isinstance(data, dict) or not any(k in data for k in RYE_KEYS):
            return data
        if "tool" in data:
            raise ValueError("an action takes either 'tool' or Rye's 'item_id' form, not both")
        if data.get("primary", "execute") != "execute" or data.get("item_type", "tool") != "tool":
            raise ValueError("only Rye actions with primary 'execute' and item_type 'tool' are supported")
        rest = {k: v for k, v in data.items() if k not in RYE_KEYS}
        return {"tool": data.get("item_id"), **rest}


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
