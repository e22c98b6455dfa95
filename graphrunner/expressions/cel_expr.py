"""CEL expressions, compiled once with the `common-expression-language` library, never `eval`.

graphrunner's own functions (`functions.FUNCTIONS`: `shell_quote`) are given to the programs
that call them, and only to those: a program that calls none runs on a plain dict, as fast as
before.
"""

from __future__ import annotations

import base64
import datetime as dt
import re
from collections.abc import Callable, Mapping
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

from graphrunner.errors import ExpressionError
from graphrunner.expressions.cel_runtime import load_cel
from graphrunner.expressions.failures import evaluation_error, first_line
from graphrunner.expressions.functions import FUNCTIONS
from graphrunner.expressions.lint import without_strings

if TYPE_CHECKING:
    from cel import Program

MAX_OPERATORS = 256
OPERATOR = re.compile(r"&&|\|\||[=!<>]=|[-+*/%<>!?.([{]|\bin\b")
MACRO_VAR = re.compile(r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,")


@cache
def _cel() -> ModuleType:
    """The CEL compiler, loaded on first use (`import cel` would also import the package's CLI)."""
    return load_cel()


class CelExpression:
    """A compiled CEL program and the namespaces it reads."""

    def __init__(self, source: str, namespaces: frozenset[str]) -> None:
        self.source = source
        _check_size(source)
        try:
            self._program: Program = _cel().compile(source)
        except (ValueError, RuntimeError) as exc:
            raise ExpressionError(first_line(f"does not parse: {exc}"), source) from None
        bound = set(MACRO_VAR.findall(source))
        self.variables = tuple(v for v in self._program.variables() if v not in bound)
        self.functions = tuple(f for f in self._program.functions() if f in FUNCTIONS)
        unknown = sorted(set(self.variables) - namespaces)
        if unknown:
            raise ExpressionError(
                f"unknown namespace {', '.join(repr(u) for u in unknown)}; "
                f"available here: {', '.join(sorted(namespaces))}",
                source,
            )

    @property
    def roots(self) -> set[str]:
        """Namespaces the expression reads."""
        return set(self.variables)

    def evaluate(self, context: Mapping[str, Any]) -> Any:
        """Run the program against `context`; any failure is an `ExpressionError` naming the expression."""
        variables = {name: context.get(name) for name in self.variables}
        failures: list[Exception] = []
        try:
            value = to_plain(self._program.execute(self._with_functions(variables, failures)))
        except Exception as exc:
            raise evaluation_error(self.source, failures[0] if failures else exc) from None
        except BaseException as exc:  # a Rust panic arrives as pyo3's PanicException
            if type(exc).__name__ != "PanicException":
                raise
            raise evaluation_error(self.source, exc) from None
        if failures:
            raise evaluation_error(self.source, failures[0])
        return value

    def _with_functions(self, variables: dict[str, Any], failures: list[Exception]) -> Any:
        """`variables` as they are, or with graphrunner's functions that the program calls
        (a new context each time: the library's contexts are not thread-safe)."""
        if not self.functions:
            return variables
        functions = {name: _guarded(FUNCTIONS[name], failures) for name in self.functions}
        return _cel().Context(variables, functions=functions)


def _guarded(function: Callable[..., Any], failures: list[Exception]) -> Callable[..., Any]:
    """`function` on plain values; what it raises is kept in `failures` rather than raised
    through the library, which would log it as a warning and bury its message in its own."""

    def call(*args: Any) -> Any:
        try:
            return function(*(to_plain(a) for a in args))
        except Exception as exc:  # a FunctionError, or a value too deep to write as text
            failures.append(exc)
            return ""  # never used: the evaluation fails with the kept error

    return call


def _check_size(source: str) -> None:
    """Refuse an expression with more than MAX_OPERATORS operators (calls, indices and members count).

    The CEL library recurses once per operator when it compiles and when it evaluates: a
    long enough chain (about 16,000 on an 8 MB stack, 400 on a 256 KB thread stack)
    overflows the stack, which kills the process instead of raising. Operators inside
    string literals do not count.
    """
    count = len(OPERATOR.findall(without_strings(source)))
    if count > MAX_OPERATORS:
        raise ExpressionError(
            f"expression has {count} operators, more than {MAX_OPERATORS}: "
            "split it, or move the data into state",
            source,
        )


def to_plain(value: Any) -> Any:
    """A CEL result as JSON-safe Python: timestamps as ISO text, durations as seconds."""
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return base64.b64encode(value).decode()
    if isinstance(value, _cel().OptionalValue):
        return to_plain(value.value()) if value.has_value() else None
    return value
