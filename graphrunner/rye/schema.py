"""A Rye `config_schema` (a JSON Schema object for the inputs) as graphrunner's `inputs:`."""

from __future__ import annotations

from typing import Any

from graphrunner.report import Issue

JSON_TYPES = {
    "string": "string",
    "integer": "integer",
    "number": "number",
    "boolean": "boolean",
    "array": "list",
    "object": "object",
}
KEPT = {"type", "default", "description", "enum"}  # what a property keeps; the rest is not enforced
WHERE = "config_schema"


class SchemaError(Exception):
    """`config_schema` is not a JSON Schema object graphrunner can read (carries the `Issue`)."""

    def __init__(self, issue: Issue) -> None:
        super().__init__(issue.message)
        self.issue = issue


def inputs_of(schema: Any, notes: list[Issue]) -> dict[str, Any]:
    """graphrunner's `inputs:` for `schema`; unenforced keywords are noted, bad shapes raise."""
    if not isinstance(schema, dict):
        raise _bad(
            WHERE, f"config_schema must be a JSON Schema object (a mapping), got {type(schema).__name__}"
        )
    if schema.get("type", "object") != "object":
        raise _bad(f"{WHERE}.type", f"config_schema must describe an object, not {schema.get('type')!r}")
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        raise _bad(f"{WHERE}.properties", "config_schema.properties must be a mapping of input names")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise _bad(f"{WHERE}.required", "config_schema.required must be a list of input names")
    for name in required:
        if name not in properties:
            raise _bad(
                f"{WHERE}.required", f"config_schema.required names {name!r}, which is not in properties"
            )
    return {name: _input(name, spec, name in required, notes) for name, spec in properties.items()}


def _input(name: str, spec: Any, required: bool, notes: list[Issue]) -> dict[str, Any]:
    where = f"{WHERE}.properties.{name}"
    if not isinstance(spec, dict):
        raise _bad(where, f"input {name!r} must be a JSON Schema mapping, got {type(spec).__name__}")
    field: dict[str, Any] = {k: v for k, v in spec.items() if k in KEPT and k != "type"}
    field["type"] = JSON_TYPES.get(spec["type"], "any") if isinstance(spec.get("type"), str) else "any"
    if required and "default" not in spec:
        field["required"] = True
    ignored = sorted(k for k in spec if k not in KEPT)
    if ignored:
        notes.append(
            Issue(
                "rye_schema_keyword_ignored",
                f"input {name!r}: JSON Schema keyword(s) {', '.join(ignored)} are not enforced here",
                location=where,
            )
        )
    return field


def _bad(location: str, message: str) -> SchemaError:
    return SchemaError(Issue("rye_bad_config_schema", message, location=location))
