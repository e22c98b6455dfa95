"""CEL expressions, compiled once with the `common-expression-language` library, never `eval`."""

from __future__ import annotations

import base64
import datetime as dt
import re
from collections.abc import Mapping
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

from graphrunner.errors import ExpressionError
from graphrunner.expressions.cel_runtime import load_cel

if TYPE_CHECKING:
    from cel import Program

MACRO_VAR = re.compile(r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,")


@cache
def _cel() -> ModuleType:
    """The CEL compiler, loaded on first use (`import cel` would also import the package's CLI)."""
    return load_cel()


class CelExpression:
    """A compiled CEL program and the namespaces it reads."""

    def __init__(self, source: str, namespaces: frozenset[str]) -> None:
        self.source = source
        try:
            self._program: Program = _cel().compile(source)
        except (ValueError, RuntimeError) as exc:
            raise ExpressionError(_first_line(f"does not parse: {exc}"), source) from None
        bound = set(MACRO_VAR.findall(source))
        self.variables = tuple(v for v in self._program.variables() if v not in bound)
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
        """Run the program against `context`; errors name the expression."""
        variables = {name: context.get(name) for name in self.variables}
        try:
            return to_plain(self._program.execute(variables))
        except KeyError as exc:
            raise ExpressionError(
                f"expression '{self.source}' read a missing key {exc}; "
                "test presence with has(...) or use a ${a || b} fallback",
                self.source,
            ) from None
        except (TypeError, ValueError, RuntimeError, OverflowError) as exc:
            raise ExpressionError(
                f"expression '{self.source}' failed: {_first_line(str(exc))}", self.source
            ) from None


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


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text
