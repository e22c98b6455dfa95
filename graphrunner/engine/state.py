"""Inputs and state at a run's boundaries: defaults, the input schema, declared types."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from graphrunner.errors import StateValidationError
from graphrunner.expressions.failures import describe
from graphrunner.model import GraphSpec, InputField, StateField

TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "list": lambda v: isinstance(v, list | tuple),
    "object": lambda v: isinstance(v, Mapping),
    "any": lambda v: True,
}


def _type_problem(name: str, value: Any, fld: StateField | InputField) -> str | None:
    if value is None or TYPE_CHECKS[fld.type](value):
        return None
    return f"'{name}' must be {fld.type}, got {type(value).__name__} {_short(value)}"


def _short(value: Any) -> str:
    text = describe(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _input_problem(name: str, value: Any, fld: InputField) -> str | None:
    problem = _type_problem(name, value, fld)
    if problem is None and fld.enum is not None and not _in(value, fld.enum):
        problem = f"'{name}' must be one of {describe(list(fld.enum))}, got {_short(value)}"
    return problem


def _in(value: Any, allowed: tuple[Any, ...]) -> bool:
    try:
        return value in allowed
    except RecursionError:  # too deep to compare: not one of the graph's (shallow) values
        return False


def check_inputs(spec: GraphSpec, inputs: Mapping[str, Any] | None) -> dict[str, Any]:
    """Inputs with defaults applied; raises `StateValidationError` naming every bad input."""
    given = dict(as_mapping(inputs, "inputs"))
    if not spec.inputs:
        return given
    declared = ", ".join(sorted(spec.inputs))
    unknown = [n if isinstance(n, str) else describe(n) for n in given if n not in spec.inputs]
    problems = {n: f"unknown input '{n}'; declared inputs: {declared}" for n in unknown}
    out = {}
    for name, fld in spec.inputs.items():
        if name in given:
            out[name] = given[name]
            problem = _input_problem(name, given[name], fld)
        elif fld.required:
            problem = f"input '{name}' is required"
        else:
            problem = None
            if fld.has_default:
                out[name] = copy.deepcopy(fld.default)
        if problem:
            problems[name] = problem
    if problems:
        raise StateValidationError(
            f"invalid inputs for graph '{spec.id}': " + "; ".join(problems.values()),
            fields=sorted(problems),
        )
    return out


def initial_state(spec: GraphSpec, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Declared fields at their defaults (null without one), then `overrides` on top."""
    state = {name: copy.deepcopy(fld.default) for name, fld in spec.state.items()}
    state.update(as_mapping(overrides, "state"))
    return state


def as_mapping(value: Mapping[str, Any] | None, what: str) -> Mapping[str, Any]:
    """`value`, or `{}` for None; raises `StateValidationError` when it is not a mapping."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise StateValidationError(f"{what} must be a mapping of field to value, got {type(value).__name__}")
    return value


def type_problems(spec: GraphSpec, state: Mapping[str, Any]) -> dict[str, str]:
    """Declared fields whose value is not of the declared type, with what is wrong."""
    problems = {}
    for name, fld in spec.state.items():
        problem = _type_problem(name, state.get(name), fld)
        if problem:
            problems[name] = problem
    return problems


def check_state(spec: GraphSpec, state: Mapping[str, Any], where: str) -> None:
    """Raise `StateValidationError` naming every field of the wrong type."""
    problems = type_problems(spec, state)
    if problems:
        raise StateValidationError(
            f"state at {where} fails its schema: " + "; ".join(problems.values()),
            fields=sorted(problems),
            state=dict(state),
        )
