"""The one place where an exception raised while evaluating an expression becomes an `ExpressionError`.

Every evaluating class (CEL programs, path chains, text rendering, structured conditions)
catches `Exception` around its work and raises `evaluation_error(source, exc)`, so nothing
but `ExpressionError` ever escapes evaluation, whatever the context holds.
"""

from __future__ import annotations

import reprlib
from typing import Any

from graphrunner.errors import ExpressionError

_SHORT = reprlib.Repr()
_SHORT.maxstring = 40
_SHORT.maxother = 40
_SHORT.maxlong = 40
_SHORT.maxlevel = 3


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


def first_line(text: str) -> str:
    """The first non-blank line of `text` (empty for blank text)."""
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else ""


def describe(value: Any) -> str:
    """A short repr of any value for a message: bounded in length and depth, never raises."""
    try:
        return _SHORT.repr(value)
    except Exception:  # a huge int, a broken __repr__: say what it is instead
        return f"<{type(value).__name__}>"
