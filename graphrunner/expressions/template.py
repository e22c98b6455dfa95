"""Interpolation: values holding `${...}`, compiled once, rendered against a context.

A string that is one whole `${...}` keeps the value's type; inside text it is rendered
as text. Mappings and lists are walked; other values pass through unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from graphrunner.errors import ExpressionError
from graphrunner.expressions.cel_expr import CelExpression
from graphrunner.expressions.failures import evaluation_error
from graphrunner.expressions.functions import FunctionCall, parse_call
from graphrunner.expressions.paths import Fallback, parse_fallback
from graphrunner.expressions.rendering import render_text
from graphrunner.expressions.scanner import has_expression, split_template


class Template(Protocol):
    """A compiled value: `render` gives its value in a context."""

    def render(self, context: Mapping[str, Any]) -> Any: ...

    def roots(self) -> set[str]: ...

    def paths(self) -> list[tuple[str, ...]]: ...


Expression = Fallback | FunctionCall | CelExpression


def compile_expression(text: str, namespaces: frozenset[str]) -> Expression:
    """A path/fallback chain when `text` is one, or one of graphrunner's functions over one
    (`shell_quote(inputs.dir || ".")`), otherwise a CEL expression."""
    fallback: Fallback | FunctionCall | None = parse_fallback(text) or parse_call(text)
    if fallback is None:
        return CelExpression(text, namespaces)
    unknown = sorted(fallback.roots - namespaces)
    if unknown:
        raise ExpressionError(
            f"unknown namespace {', '.join(repr(u) for u in unknown)} in '{text}'; "
            f"available here: {', '.join(sorted(namespaces))}",
            text,
        )
    return fallback


def expression_roots(expr: Expression) -> set[str]:
    """The namespaces an expression reads."""
    return expr.roots


def expression_paths(expr: Expression) -> list[tuple[str, ...]]:
    """The dotted paths an expression reads (only known exactly for path chains)."""
    chain = expr.chain if isinstance(expr, FunctionCall) else expr
    if isinstance(chain, Fallback):
        return [c for c, lit in zip(chain.choices, chain.literal_flags, strict=True) if not lit]
    return []


class Constant:
    """A value with no expression in it."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def render(self, context: Mapping[str, Any]) -> Any:
        return self.value

    def roots(self) -> set[str]:
        return set()

    def paths(self) -> list[tuple[str, ...]]:
        return []


class Whole:
    """A string that is exactly one `${...}`: keeps the value's type."""

    def __init__(self, expr: Expression) -> None:
        self.expr = expr

    def render(self, context: Mapping[str, Any]) -> Any:
        return self.expr.evaluate(context)

    def roots(self) -> set[str]:
        return expression_roots(self.expr)

    def paths(self) -> list[tuple[str, ...]]:
        return expression_paths(self.expr)


class Inline:
    """Text with expressions inside: rendered as one string."""

    def __init__(self, parts: list[str | Expression]) -> None:
        self.parts = parts

    def render(self, context: Mapping[str, Any]) -> Any:
        return "".join(p if isinstance(p, str) else _as_text(p, context) for p in self.parts)

    def roots(self) -> set[str]:
        return set().union(*(expression_roots(p) for p in self.parts if not isinstance(p, str)))

    def paths(self) -> list[tuple[str, ...]]:
        return [q for p in self.parts if not isinstance(p, str) for q in expression_paths(p)]


def _as_text(expr: Expression, context: Mapping[str, Any]) -> str:
    """The value of `expr` rendered as text; a value that cannot be is an `ExpressionError`."""
    value = expr.evaluate(context)
    try:
        return render_text(value)
    except Exception as exc:  # too deep, a huge integer, keys JSON cannot write
        raise evaluation_error(expr.source, exc) from None


class Structure:
    """A mapping or list whose members hold expressions."""

    def __init__(self, members: dict[str, Template] | list[Template]) -> None:
        self.members = members

    def render(self, context: Mapping[str, Any]) -> Any:
        if isinstance(self.members, dict):
            return {k: t.render(context) for k, t in self.members.items()}
        return [t.render(context) for t in self.members]

    def _all(self) -> list[Template]:
        return list(self.members.values() if isinstance(self.members, dict) else self.members)

    def roots(self) -> set[str]:
        return set().union(*(t.roots() for t in self._all()))

    def paths(self) -> list[tuple[str, ...]]:
        return [p for t in self._all() for p in t.paths()]


def compile_template(value: Any, namespaces: frozenset[str]) -> Template:
    """Compile a value for interpolation; raises `ExpressionError` naming the expression."""
    if isinstance(value, str):
        return _compile_string(value, namespaces)
    if isinstance(value, dict):
        members = {str(k): compile_template(v, namespaces) for k, v in value.items()}
        if all(isinstance(m, Constant) for m in members.values()):
            return Constant(value)
        return Structure(members)
    if isinstance(value, list | tuple):
        items = [compile_template(v, namespaces) for v in value]
        if all(isinstance(m, Constant) for m in items):
            return Constant(list(value))
        return Structure(items)
    return Constant(value)


def _compile_string(text: str, namespaces: frozenset[str]) -> Template:
    if not has_expression(text):
        return Constant(text.replace("$${", "${"))
    parts = split_template(text)
    if len(parts) == 1 and parts[0][0]:
        return Whole(compile_expression(parts[0][1], namespaces))
    return Inline([compile_expression(t, namespaces) if is_expr else t for is_expr, t in parts])
