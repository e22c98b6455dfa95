"""Conditions: a CEL string, or the structured `{path, op, value}` form with all/any/not."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from graphrunner.model.base import Model

Op = Literal["eq", "ne", "gt", "gte", "lt", "lte", "in", "not_in", "contains", "matches", "exists", "truthy"]


class StructuredCondition(Model):
    """`{path, op, value}`, or a combination `{all: [...]}`, `{any: [...]}`, `{not: ...}`."""

    path: str | None = None
    op: Op | None = None
    value: Any = None
    all: tuple[Condition, ...] | None = None
    any: tuple[Condition, ...] | None = None
    not_: Condition | None = Field(default=None, alias="not")

    @model_validator(mode="after")
    def _one_form(self) -> StructuredCondition:
        forms = [
            name
            for name, present in (
                ("path", self.path is not None),
                ("all", self.all is not None),
                ("any", self.any is not None),
                ("not", self.not_ is not None),
            )
            if present
        ]
        if len(forms) != 1:
            raise ValueError(
                "a condition takes exactly one of 'path' (with 'op'), 'all', 'any' or 'not'"
                + (f", got {', '.join(forms)}" if forms else "")
            )
        if self.path is not None and self.op is None:
            raise ValueError(f"condition on '{self.path}' has no 'op'")
        return self


Condition = str | StructuredCondition
StructuredCondition.model_rebuild()
