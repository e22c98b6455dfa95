"""A pydantic state model as the `state:` section of a graph: type, default, reducer per field."""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticSerializationError, to_jsonable_python

from graphrunner.builder.reducers import Reducer, marker_of
from graphrunner.builder.references import NotImportable, reference_of
from graphrunner.report import Issue

SCALARS: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),  # before int: a bool is an int
    (int, "integer"),
    (float, "number"),
    (str, "string"),
)


def state_section(model: type[BaseModel]) -> tuple[dict[str, Any], list[Issue]]:
    """The `state:` mapping of a graph for `model`, and the issues found on the way."""
    section: dict[str, Any] = {}
    issues: list[Issue] = []
    for name, info in model.model_fields.items():
        where = f"state.{name}"
        if info.alias is not None and info.alias != name:
            issues.append(
                Issue(
                    "invalid_schema",
                    f"state field '{name}' has the alias '{info.alias}'; state fields are stored by "
                    "name, so builder state models cannot use aliases",
                    location=where,
                )
            )
        entry, problems = _field(name, info)
        section[name] = entry
        issues += [Issue(code, message, location=where) for code, message in problems]
    return section, issues


def _field(name: str, info: FieldInfo) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    entry: dict[str, Any] = {"type": field_type(info.annotation)}
    problems: list[tuple[str, str]] = []
    if not info.is_required():
        try:
            entry["default"] = to_jsonable_python(info.get_default(call_default_factory=True))
        except PydanticSerializationError as exc:
            problems.append(("invalid_schema", f"state field '{name}': the default is not JSON data: {exc}"))
    reducers, reducer_problems = _reducers(name, info.metadata)
    problems += reducer_problems
    if len(reducers) == 1:
        entry["reducer"] = reducers[0]
    elif reducers:
        entry["reducer"] = reducers  # a list: `conflicting_reducers`, reported by validation
    if info.description:
        entry["description"] = info.description
    return entry, problems


def _reducers(name: str, metadata: Sequence[Any]) -> tuple[list[Any], list[tuple[str, str]]]:
    written: list[Any] = []
    problems: list[tuple[str, str]] = []
    for marker in (m for m in map(marker_of, metadata) if m is not None):
        try:
            written.append(_written(marker, name))
        except NotImportable as exc:
            problems.append(("reducer_configuration_invalid", f"state field '{name}': {exc}"))
    return written, problems


def _written(marker: Reducer, name: str) -> str | dict[str, Any]:
    if marker.function is None:
        return marker.to_yaml()
    return marker.to_yaml(reference_of(marker.function, f"the custom reducer of state field '{name}'"))


def field_type(annotation: Any) -> str:
    """The graph-language type of a Python annotation (`any` when it has no one type)."""
    annotation = _without_none(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return field_type(typing.get_args(annotation)[0])
    if origin is Literal:
        kinds = {field_type(type(v)) for v in typing.get_args(annotation)}
        return kinds.pop() if len(kinds) == 1 else "any"
    target = origin or annotation
    if not isinstance(target, type):
        return "any"
    if issubclass(target, enum.Enum):
        return next((kind for base, kind in SCALARS if issubclass(target, base)), "any")
    for base, kind in SCALARS:
        if issubclass(target, base):
            return kind
    if issubclass(target, BaseModel | Mapping | dict):
        return "object"
    if issubclass(target, list | tuple | set | frozenset | Sequence) and not issubclass(target, str | bytes):
        return "list"
    return "any"


def _without_none(annotation: Any) -> Any:
    """`X | None` (or `Optional[X]`) is X: null is accepted for every type."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        return rest[0] if len(rest) == 1 else Any
    return annotation
