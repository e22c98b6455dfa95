"""Conditions compiled once: CEL strings and the structured `{path, op, value}` form."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import cache
from types import ModuleType
from typing import Any, Protocol

from graphrunner.errors import ExpressionError
from graphrunner.expressions.failures import describe, evaluation_error
from graphrunner.expressions.paths import parse_fallback
from graphrunner.expressions.scanner import split_template
from graphrunner.expressions.template import (
    Constant,
    Expression,
    Template,
    compile_expression,
    compile_template,
    expression_paths,
)
from graphrunner.model.conditions import Condition, StructuredCondition


class Regex(Protocol):
    """A compiled pattern (RE2's): `search` gives a match or None."""

    def search(self, text: str) -> Any: ...


class CompiledCondition(Protocol):
    """A condition ready to test against a context."""

    source: str

    def holds(self, context: Mapping[str, Any]) -> bool: ...

    def roots(self) -> set[str]: ...

    def paths(self) -> list[tuple[str, ...]]: ...


class ExpressionCondition:
    """A CEL (or path) condition; it must give a boolean (null counts as false)."""

    def __init__(self, source: str, expr: Expression) -> None:
        self.source = source
        self.expr = expr

    def holds(self, context: Mapping[str, Any]) -> bool:
        value = self.expr.evaluate(context)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise ExpressionError(
                f"condition '{self.source}' gave {type(value).__name__} {describe(value)}, not a boolean",
                self.source,
            )
        return value

    def roots(self) -> set[str]:
        return self.expr.roots

    def paths(self) -> list[tuple[str, ...]]:
        return expression_paths(self.expr)


def _mismatched(left: Any, right: Any) -> bool:
    """Booleans are not numbers here: `true` never equals or compares with `1`."""
    return isinstance(left, bool) != isinstance(right, bool) and not (left is None or right is None)


def _equal(left: Any, right: Any) -> bool:
    return not _mismatched(left, right) and bool(left == right)


def _compare(op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def test(left: Any, right: Any) -> bool:
        if left is None or right is None or _mismatched(left, right):
            return False
        try:
            return bool(op(left, right))
        except TypeError:
            return False

    return test


def _contains(container: Any, member: Any) -> bool:
    if isinstance(container, str):
        return isinstance(member, str) and member in container
    if isinstance(container, dict):
        return any(_equal(k, member) for k in container)
    if isinstance(container, list | tuple):
        return any(_equal(v, member) for v in container)
    return False


def _number(value: Any) -> float | None:
    """`value` as a number when it is one or is text that reads as one (`"2\n"`), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _walker(op: Callable[[Any, Any], bool], ordered: bool) -> Callable[[Any, Any], bool]:
    """The walker's comparison: values that arrive as text compare as numbers when both read as
    numbers (ordered ops), or when one side is a number (eq, ne); anything else as `op` does."""

    def test(left: Any, right: Any) -> bool:
        a, b = _number(left), _number(right)
        numeric = ordered or isinstance(left, int | float) or isinstance(right, int | float)
        if a is not None and b is not None and numeric:
            return bool(WALKER_NUMERIC[op](a, b))
        return op(left, right)

    return test


OPS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": _equal,
    "ne": lambda a, b: not _equal(a, b),
    "gt": _compare(lambda a, b: a > b),
    "gte": _compare(lambda a, b: a >= b),
    "lt": _compare(lambda a, b: a < b),
    "lte": _compare(lambda a, b: a <= b),
    "in": lambda a, b: _contains(b, a),
    "not_in": lambda a, b: not _contains(b, a),
    "contains": _contains,
    "exists": lambda a, b: a is not None,
    "truthy": lambda a, b: bool(a),
}
WALKER_NUMERIC: dict[Callable[[Any, Any], bool], Callable[[float, float], bool]] = {
    OPS["eq"]: lambda a, b: a == b,
    OPS["ne"]: lambda a, b: a != b,
    OPS["gt"]: lambda a, b: a > b,
    OPS["gte"]: lambda a, b: a >= b,
    OPS["lt"]: lambda a, b: a < b,
    OPS["lte"]: lambda a, b: a <= b,
}
# a Rye graph's conditions (`rye=True`): comparisons of text that reads as numbers are numeric
RYE_OPS = {
    **OPS,
    **{name: _walker(OPS[name], name not in ("eq", "ne")) for name in ("eq", "ne", "gt", "gte", "lt", "lte")},
}


class PathCondition:
    """`{path, op, value}`: `value` may itself be interpolated."""

    def __init__(self, cond: StructuredCondition, namespaces: frozenset[str], rye: bool = False) -> None:
        assert cond.path is not None and cond.op is not None
        self.source = f"{cond.path} {cond.op} {describe(cond.value)}"
        path = parse_fallback(cond.path)
        if path is None:
            raise ExpressionError(f"condition path {cond.path!r} is not a dotted path", cond.path)
        self.expr = compile_expression(cond.path, namespaces)
        self.op = cond.op
        self.ops = RYE_OPS if rye else OPS
        self.value: Template = compile_template(cond.value, namespaces)
        self.pattern: LinearRegex | None = None
        if self.op == "matches" and isinstance(self.value, Constant):
            self.pattern = LinearRegex(self.value.value)

    def holds(self, context: Mapping[str, Any]) -> bool:
        left = self.expr.evaluate(context)
        right = self.value.render(context)
        try:
            if self.op == "matches":
                pattern = self.pattern or LinearRegex(right)
                return isinstance(left, str) and pattern.search(left)
            return self.ops[self.op](left, right)
        except Exception as exc:  # values too deep to compare, and the like
            raise evaluation_error(self.source, exc) from None

    def roots(self) -> set[str]:
        return self.expr.roots | self.value.roots()

    def paths(self) -> list[tuple[str, ...]]:
        return expression_paths(self.expr) + self.value.paths()


class LinearRegex:
    r"""A `matches` pattern compiled by RE2, whose matching time is linear in the text: no pattern
    can make a match backtrack (Python's `re` takes minutes on `(a+)+$` against 30 `a`s and a `b`).

    It searches as Python's `re` did: `$` also matches before a final newline (the walker's
    `^[0-9]+$` holds for `"2\n"`), and Python's `\Z` is RE2's `\z`, the very end of the text.
    """

    def __init__(self, source: Any) -> None:
        if not isinstance(source, str):
            raise ExpressionError(f"'matches' needs a regular expression string, got {describe(source)}")
        self.compiled = _regex(PYTHON_END.sub(r"\1\\z", source), source)
        self.before_newline = "$" in source and not ABSOLUTE_END.search(source)

    def search(self, text: str) -> bool:
        """True when the pattern matches somewhere in `text`."""
        if self.compiled.search(text) is not None:
            return True
        # `$` before a final newline: a match of the text without it (only `$` can tell them apart)
        return self.before_newline and text.endswith("\n") and self.compiled.search(text[:-1]) is not None


PYTHON_END = re.compile(r"(?<!\\)((?:\\\\)*)\\Z")  # an unescaped `\Z`
ABSOLUTE_END = re.compile(r"(?<!\\)(?:\\\\)*\\[zZ]")  # an unescaped `\z` or `\Z`


def _regex(value: str, source: str) -> Regex:
    """`value` (the graph's `source`, in RE2's words) compiled by RE2; an `ExpressionError` naming
    `source` when RE2 cannot take it."""
    try:
        compiled: Regex = _re2().compile(value, _options())
    except (_re2().error, UnicodeError) as exc:  # an unpaired surrogate cannot be UTF-8
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ExpressionError(
            f"bad regular expression {describe(source)}: {reason}{RE2_RULE}", source
        ) from None
    return compiled


RE2_RULE = (
    " (patterns are RE2 syntax, matched in linear time: no backreferences or lookaround; "
    "see docs/graph-language.md)"
)


@cache
def _re2() -> ModuleType:
    """The RE2 module, loaded on first use (only graphs with `matches` need it)."""
    import re2

    module: ModuleType = re2
    return module


@cache
def _options() -> Any:
    """RE2's options: errors are raised as `ExpressionError`, not also logged to stderr."""
    options = _re2().Options()
    options.log_errors = False
    return options


class Combined:
    """`all`, `any` or `not` over other conditions."""

    def __init__(self, kind: str, parts: list[CompiledCondition]) -> None:
        self.kind = kind
        self.parts = parts
        self.source = f"{kind}({', '.join(p.source for p in parts)})"

    def holds(self, context: Mapping[str, Any]) -> bool:
        if self.kind == "all":
            return all(p.holds(context) for p in self.parts)
        if self.kind == "any":
            return any(p.holds(context) for p in self.parts)
        return not self.parts[0].holds(context)

    def roots(self) -> set[str]:
        return set().union(*(p.roots() for p in self.parts))

    def paths(self) -> list[tuple[str, ...]]:
        return [q for p in self.parts for q in p.paths()]


def compile_condition(cond: Condition, namespaces: frozenset[str], rye: bool = False) -> CompiledCondition:
    """Compile a `when`; raises `ExpressionError` for a malformed one. A Rye graph's structured
    conditions (`rye`) compare as the walker's condition evaluator does."""
    if isinstance(cond, str):
        parts = split_template(cond.strip())
        source = parts[0][1] if len(parts) == 1 and parts[0][0] else cond
        return ExpressionCondition(source, compile_expression(source, namespaces))
    if cond.path is not None:
        return PathCondition(cond, namespaces, rye)
    if cond.not_ is not None:
        return Combined("not", [compile_condition(cond.not_, namespaces, rye)])
    kind, members = ("all", cond.all) if cond.all is not None else ("any", cond.any or ())
    return Combined(kind, [compile_condition(c, namespaces, rye) for c in members])
