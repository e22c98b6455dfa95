"""Warnings for expressions that are sure to fail when they run: a constant zero divisor, a
constant index out of a literal list (`constant_division_by_zero`, `constant_index_out_of_range`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from graphrunner.errors import ExpressionError
from graphrunner.expressions.lint import constant_problems
from graphrunner.expressions.scanner import has_expression, split_template
from graphrunner.model import GraphSpec
from graphrunner.model.conditions import StructuredCondition
from graphrunner.report import Issue

Site = tuple[str, str]  # (location, CEL text)


def constant_failures(spec: GraphSpec) -> list[Issue]:
    """One warning per certain run-time failure written into an expression of `spec`."""
    issues = []
    for node, where, text in _sites(spec):
        subject = f"node '{node}': {where.removeprefix(f'nodes.{node}.')}" if node else where
        issues += [
            Issue(code, f"{subject}: expression '{text}' {problem}", node=node, location=where)
            for code, problem in constant_problems(text)
        ]
    return issues


def _sites(spec: GraphSpec) -> Iterator[tuple[str | None, str, str]]:
    for name, node in spec.nodes.items():
        base = f"nodes.{name}"
        for where, text in _bodies(node.model_dump(exclude={"next"}, by_alias=True), base):
            yield name, where, text
        nxt = getattr(node, "next", None)
        for i, branch in enumerate(nxt.branches if nxt is not None else ()):
            for where, text in _condition(branch.when, f"{base}.next.{i}.when"):
                yield name, where, text
    for i, hook in enumerate(spec.config.hooks):
        sites = [*_condition(hook.when, f"config.hooks.{i}.when")]
        sites += _bodies(hook.action.params, f"config.hooks.{i}.action.params")
        yield from ((None, where, text) for where, text in sites)


def _bodies(value: Any, where: str) -> Iterator[Site]:
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


def _condition(cond: Any, where: str) -> Iterator[Site]:
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
