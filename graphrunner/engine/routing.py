"""Choosing the next node: branches against the post-update state, or a routing function."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graphrunner.arguments import typed_first
from graphrunner.compiled import CompiledNext
from graphrunner.errors import ExpressionError, NodeError, RoutingError
from graphrunner.model import END


def route(
    nxt: CompiledNext | None, context: Mapping[str, Any], nodes: Mapping[str, Any], node: str
) -> str | None:
    """The next node name, or None to end the run; raises `RoutingError` or `NodeError`."""
    if nxt is None:
        return None
    target = _by_function(nxt, context, node) if nxt.fn_ref else _by_branches(nxt, context, node)
    if target == END:
        return None
    if target not in nodes:
        raise RoutingError(
            f"node '{node}': next resolved to '{target}', which is neither a node nor '{END}'",
            node=node,
        )
    return target


def _by_branches(nxt: CompiledNext, context: Mapping[str, Any], node: str) -> str:
    for target, when in nxt.branches:
        try:
            if when is None or when.holds(context):
                return target
        except ExpressionError as exc:
            raise NodeError(
                f"node '{node}': next condition failed: {exc}", node=node, category="edge_exception"
            ) from exc
    if nxt.unmatched_ends:
        return END
    raise RoutingError(f"node '{node}': no branch of next matched and there is no default branch", node=node)


def _by_function(nxt: CompiledNext, context: Mapping[str, Any], node: str) -> str:
    """The function's answer; its state parameter gets a model instance when annotated with one."""
    if nxt.fn is None:
        raise RoutingError(f"node '{node}': routing function {nxt.fn_ref!r} is not importable", node=node)
    try:
        target = nxt.fn(typed_first(nxt.fn, dict(context["state"])))
    except Exception as exc:
        raise NodeError(
            f"node '{node}': routing function {nxt.fn_ref} raised {type(exc).__name__}: {exc}",
            node=node,
            category="edge_exception",
        ) from exc
    if not isinstance(target, str):
        raise RoutingError(
            f"node '{node}': routing function {nxt.fn_ref} returned {target!r}, not a node name",
            node=node,
        )
    return target
