"""The one place where an exception raised while evaluating an expression becomes an `ExpressionError`.

Every evaluating class (CEL programs, path chains, text rendering, structured conditions)
catches `Exception` around its work and raises `evaluation_error(source, exc)`, so nothing
but `ExpressionError` ever escapes evaluation, whatever the context holds.
"""

from __future__ import annotations

from graphrunner.errors import ExpressionError
from graphrunner.text import describe, first_line

__all__ = ["cause", "describe", "evaluation_error", "first_line"]


def evaluation_error(source: str, exc: BaseException) -> ExpressionError:
    """`exc`, raised while evaluating `source`, as an `ExpressionError` naming both."""
    if isinstance(exc, ExpressionError):
        return exc
    if isinstance(exc, KeyError):
        return ExpressionError(
            f"expression '{source}' read a missing key {describe(exc.args[0] if exc.args else None)}; "
            "test presence with has(...) or use a ${a || b} fallback",
            source,
        )
    return ExpressionError(f"expression '{source}' failed: {cause(exc)}", source)


def cause(exc: BaseException) -> str:
    """The first line of what went wrong, worded for a graph author."""
    if isinstance(exc, RecursionError):
        return "a value is nested too deeply to evaluate"
    text = first_line(str(exc)).removesuffix(" in CEL expression")
    return text or type(exc).__name__
