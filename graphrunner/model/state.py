"""Input schema and state schema: declared fields, their types, defaults and reducers."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from graphrunner.model.base import Model

FieldType = Literal["string", "integer", "number", "boolean", "list", "object", "any"]
TYPE_ALIASES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "array": "list",
    "dict": "object",
    "map": "object",
    "mapping": "object",
}


def _canonical_type(value: Any) -> Any:
    return TYPE_ALIASES.get(value, value) if isinstance(value, str) else value


class ReducerRef(Model):
    """A reducer by name (canonical or `pkg.module:fn`) with its parameters."""

    name: str = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)
    conflicting: tuple[str, ...] = ()


class StateField(Model):
    """A declared state field: type, default and exactly one reducer."""

    type: FieldType = "any"
    default: Any = None
    reducer: ReducerRef = ReducerRef(name="last_write_wins")
    description: str | None = None

    _type = field_validator("type", mode="before")(_canonical_type)

    @field_validator("reducer", mode="before")
    @classmethod
    def _reducer_forms(cls, value: Any) -> Any:
        """`append`, `{name: bounded_append, max_len: 5}`; a list of several is a conflict."""
        if isinstance(value, str):
            return {"name": value}
        if isinstance(value, list):
            if not value:
                raise ValueError("reducer list is empty")
            odd = [v for v in value if not isinstance(v, str | dict)]
            if odd:
                raise ValueError(f"a reducer is a name or a mapping with 'name', got {odd[0]!r:.60}")
            names = [v if isinstance(v, str) else v.get("name") for v in value]
            distinct = list(dict.fromkeys(str(n) for n in names))
            first = value[0] if isinstance(value[0], dict) else {"name": value[0]}
            return {**_split_params(first), "conflicting": distinct if len(distinct) > 1 else []}
        if isinstance(value, dict):
            return _split_params(value)
        return value

    @property
    def has_default(self) -> bool:
        """True when `default` was written in the graph (a null default counts)."""
        return "default" in self.model_fields_set


def _split_params(value: dict[str, Any]) -> dict[str, Any]:
    if "params" in value:
        return value
    return {"name": value.get("name"), "params": {k: v for k, v in value.items() if k != "name"}}


class InputField(Model):
    """A declared input: type, required, default, allowed values."""

    type: FieldType = "any"
    required: bool = False
    default: Any = None
    enum: tuple[Any, ...] | None = None
    description: str | None = None

    _type = field_validator("type", mode="before")(_canonical_type)

    @property
    def has_default(self) -> bool:
        """True when `default` was written in the graph."""
        return "default" in self.model_fields_set
