"""Node and routing functions of a builder graph, checked and written as graph-file YAML."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from graphrunner.builder.references import NotImportable, reference_of
from graphrunner.report import Issue

PASSABLE = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def node_action(name: str, fn: Callable[..., Any]) -> tuple[dict[str, Any] | None, list[Issue]]:
    """The `action` of node `name` calling `fn(state)` through the `python` tool, or the issues."""
    what = f"node '{name}': the node function"
    try:
        ref = reference_of(fn, what)
        param = _state_parameter(fn, what)
        _hints(fn, what)
    except NotImportable as exc:
        return None, [_issue(name, str(exc), f"nodes.{name}.action")]
    return {"tool": "python", "params": {"fn": ref, "args": {param: "${state}"}}}, []


def item_action(name: str, fn: Callable[..., Any]) -> tuple[dict[str, Any] | None, list[Issue]]:
    """The `action` of foreach node `name` calling `fn(item)` once per item through the `python`
    tool; `index` and `state` are passed too when `fn` has parameters of those names."""
    return _call_action(name, fn, "the foreach function", "item", ("index", "state"))


def hook_action(where: str, fn: Callable[..., Any]) -> tuple[dict[str, Any] | None, list[Issue]]:
    """The `action` of a hook calling `fn(event)`, and `state` when `fn` has such a parameter."""
    return _call_action(None, fn, f"{where}: the hook function", "event", ("state",), where)


def _call_action(
    node: str | None,
    fn: Callable[..., Any],
    role: str,
    first: str,
    optional: tuple[str, ...],
    where: str | None = None,
) -> tuple[dict[str, Any] | None, list[Issue]]:
    what = f"node '{node}': {role}" if node else role
    try:
        ref = reference_of(fn, what)
        param = _first_parameter(fn, what, first)
        extra = [p for p in optional if p in inspect.signature(fn).parameters and p != param]
        _takes_one(fn, what, param, extra, first)
        _hints(fn, what)
    except NotImportable as exc:
        return None, [_issue(node, str(exc), where or f"nodes.{node}.action")]
    args = {param: "${" + first + "}", **{p: "${" + p + "}" for p in extra}}
    return {"tool": "python", "params": {"fn": ref, "args": args}}, []


def routing_next(name: str, fn: Callable[..., Any]) -> tuple[str | None, list[Issue]]:
    """The `next.fn` reference of node `name`'s conditional edge `fn(state)`, or the issues."""
    what = f"node '{name}': the conditional edge function"
    try:
        ref = reference_of(fn, what)
        if inspect.iscoroutinefunction(fn):
            raise NotImportable(
                f"{what} {ref} is async; routing functions are called synchronously with the "
                "state after the node's update: make it a plain def"
            )
        _takes_one(fn, what)
        _hints(fn, what)
    except NotImportable as exc:
        return None, [_issue(name, str(exc), f"nodes.{name}.next.fn")]
    return ref, []


def _state_parameter(fn: Callable[..., Any], what: str) -> str:
    """The name of the parameter the state is passed to (by keyword, as the `python` tool does)."""
    name = _first_parameter(fn, what, "state")
    _takes_one(fn, what, name)
    return name


def _first_parameter(fn: Callable[..., Any], what: str, role: str) -> str:
    params = list(inspect.signature(fn).parameters.values())
    if not params or params[0].kind not in PASSABLE:
        raise NotImportable(f"{what} must take the {role} as its first parameter, by name: def f({role})")
    return params[0].name


def _takes_one(
    fn: Callable[..., Any],
    what: str,
    keyword: str | None = None,
    extra: list[str] | None = None,
    role: str = "state",
) -> None:
    signature = inspect.signature(fn)
    try:
        if keyword is None:
            signature.bind(None)
        else:
            signature.bind(**{keyword: None}, **dict.fromkeys(extra or ()))
    except TypeError as exc:
        also = f" (and {', '.join(extra)})" if extra else ""
        raise NotImportable(
            f"{what} must take the {role} as its only required argument{also}, "
            f"got {fn.__name__}{signature} ({exc})"
        ) from None


def _hints(fn: Callable[..., Any], what: str) -> None:
    """Annotations must resolve: a parameter annotated with a pydantic model gets an instance."""
    try:
        typing.get_type_hints(fn)
    except Exception as exc:
        raise NotImportable(
            f"{what} has annotations that cannot be resolved ({type(exc).__name__}: {exc}); "
            "the state parameter's annotation decides whether it receives a model instance"
        ) from None


def _issue(node: str | None, message: str, location: str) -> Issue:
    return Issue("invalid_schema", message, node=node, location=location)
