"""Typed arguments for Python functions a graph calls (the `python` tool, routing functions).

A mapping given to a parameter annotated with a pydantic model arrives as an instance of
that model, validated; any other argument arrives as it is (JSON data).
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError


class ArgumentError(ValueError):
    """An argument does not fit the pydantic model its parameter is annotated with."""


def model_parameters(fn: Callable[..., Any]) -> dict[str, type[BaseModel]]:
    """The parameters of `fn` annotated with a pydantic model class, by name."""
    try:
        return _cached_models(fn)
    except TypeError:  # an unhashable callable object
        return _models(fn)


@functools.lru_cache(maxsize=1024)
def _cached_models(fn: Callable[..., Any]) -> dict[str, type[BaseModel]]:
    return _models(fn)


def _models(fn: Callable[..., Any]) -> dict[str, type[BaseModel]]:
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable annotations: the arguments stay plain data
        return {}
    return {
        name: hint
        for name, hint in hints.items()
        if name != "return" and isinstance(hint, type) and issubclass(hint, BaseModel)
    }


def typed_arguments(fn: Callable[..., Any], args: Mapping[str, Any]) -> dict[str, Any]:
    """`args` with each mapping for a model-annotated parameter validated into that model."""
    models = model_parameters(fn)
    return {name: _typed(models.get(name), name, value) for name, value in args.items()}


def first_parameter(fn: Callable[..., Any]) -> str | None:
    """The name of the first parameter of `fn`, or None when it has none (or no signature)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    return params[0].name if params else None


def typed_first(fn: Callable[..., Any], value: Any) -> Any:
    """`value` as the first argument of `fn`: a model instance when that parameter wants one."""
    name = first_parameter(fn)
    if name is None:
        return value
    return _typed(model_parameters(fn).get(name), name, value)


def _typed(model: type[BaseModel] | None, name: str, value: Any) -> Any:
    if model is None or not isinstance(value, Mapping):
        return value
    try:
        return model.model_validate(dict(value))
    except ValidationError as exc:
        raise ArgumentError(f"argument '{name}' does not fit {model.__name__}: {describe(exc)}") from None


def describe(exc: ValidationError) -> str:
    """A pydantic validation error on one line: `field: problem; ...`."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or '(whole value)'}: {e['msg']}" for e in exc.errors()
    )
