"""Where a graph holds expressions: every `${...}` body and condition, with its node and location,
so a finding about an expression is reported on the line that wrote it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from graphrunner.errors import ExpressionError
from graphrunner.expressions.scanner import has_expression, split_template
from graphrunner.model import GraphSpec
from graphrunner.model.conditions import StructuredCondition


@dataclass(frozen=True)
class Site:
    """One expression of the graph: its node (None for a hook), location and CEL text."""

    node: str | None
    location: str
    text: str


def expression_sites(spec: GraphSpec) -> Iterator[Site]:
    """Every expression of `spec`, node by node, then the hooks'."""
    for name, node in spec.nodes.items():
        base = f"nodes.{name}"
        for where, text in _bodies(node.model_dump(exclude={"next"}, by_alias=True), base):
            yield Site(name, where, text)
        nxt = getattr(node, "next", None)
        for i, branch in enumerate(nxt.branches if nxt is not None else ()):
            yield from (Site(name, w, t) for w, t in _condition(branch.when, f"{base}.next.{i}.when"))
    for i, hook in enumerate(spec.config.hooks):
        yield from (Site(None, w, t) for w, t in _condition(hook.when, f"config.hooks.{i}.when"))
        yield from (
            Site(None, w, t) for w, t in _bodies(hook.action.params, f"config.hooks.{i}.action.params")
        )


def condition_paths(spec: GraphSpec) -> Iterator[Site]:
    """The `path` of every structured condition (`{path: state.x, op: truthy}` reads `state.x`)."""
    for name, node in spec.nodes.items():
        nxt = getattr(node, "next", None)
        for i, branch in enumerate(nxt.branches if nxt is not None else ()):
            yield from (Site(name, w, p) for w, p in _paths(branch.when, f"nodes.{name}.next.{i}.when"))
    for i, hook in enumerate(spec.config.hooks):
        yield from (Site(None, w, p) for w, p in _paths(hook.when, f"config.hooks.{i}.when"))


def _bodies(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """Every `${...}` body inside a value, with the location of the string holding it."""
    if isinstance(value, str):
        yield from ((where, text) for text in _expressions(value))
    elif isinstance(value, Mapping):
        for key, member in value.items():
            yield from _bodies(member, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for index, member in enumerate(value):
            yield from _bodies(member, f"{where}.{index}")


def _expressions(text: str) -> list[str]:
    try:
        return [body for is_expr, body in split_template(text) if is_expr]
    except ExpressionError:  # reported as bad_expression by compilation
        return []


def _condition(cond: Any, where: str) -> Iterator[tuple[str, str]]:
    """The CEL text of a `when`: a bare CEL string, `${...}` bodies, structured values."""
    if isinstance(cond, str):
        yield from _bodies(cond, where) if has_expression(cond) else [(where, cond)]
    elif isinstance(cond, StructuredCondition):
        yield from _bodies(cond.value, f"{where}.value")
        for kind, parts in (("all", cond.all), ("any", cond.any)):
            for index, part in enumerate(parts or ()):
                yield from _condition(part, f"{where}.{kind}.{index}")
        if cond.not_ is not None:
            yield from _condition(cond.not_, f"{where}.not")


def _paths(cond: Any, where: str) -> Iterator[tuple[str, str]]:
    if not isinstance(cond, StructuredCondition):
        return
    if cond.path is not None:
        yield f"{where}.path", cond.path
    for kind, parts in (("all", cond.all), ("any", cond.any)):
        for index, part in enumerate(parts or ()):
            yield from _paths(part, f"{where}.{kind}.{index}")
    if cond.not_ is not None:
        yield from _paths(cond.not_, f"{where}.not")
