"""The functions graphrunner adds to CEL, callable in every `${...}` and condition of any graph
(Rye graph files included): `shell_quote`.

A function gets its arguments as plain Python values (`cel_expr.to_plain`: timestamps as ISO
text, bytes as text) and returns a CEL value. An exception it raises (a `FunctionError` says
what it cannot take) fails the expression with its message, worded for the graph author.

Called on a path chain, `shell_quote(inputs.dir || state.dir || ".")` reads the paths as
`${inputs.dir || state.dir || "."}` does (a missing path is null, never an error): CEL alone
would read that `||` as a boolean or. `FunctionCall` is that form.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from graphrunner.expressions.failures import evaluation_error
from graphrunner.expressions.lint import without_strings
from graphrunner.expressions.paths import Fallback, parse_fallback
from graphrunner.expressions.rendering import render_text

SHELL_QUOTE = "shell_quote"
CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)", re.DOTALL)


class FunctionError(Exception):
    """A function was called with what it cannot take; the message says what and why."""


def shell_quote(*args: Any) -> str:
    """`value` as POSIX shell text that the shell reads back as exactly `value`, never as syntax.

    A scalar is one word, converted to text as interpolation converts it (null is `''`, the
    empty word); a list is one word per item, joined with spaces (an empty list is no word).
    Quoting is `shlex.quote`'s: words of `[A-Za-z0-9_@%+=:,./-]` stay as written, anything
    else goes in single quotes, a `'` inside written `'"'"'`.
    """
    if len(args) != 1:
        raise FunctionError(f"{SHELL_QUOTE}() takes one value, got {len(args)}")
    value = args[0]
    if isinstance(value, list):
        return " ".join(_word(item) for item in value)
    return _word(value)


def _word(value: Any) -> str:
    """One value as one shell word."""
    text = render_text(value)
    if "\0" in text:
        raise FunctionError(f"{SHELL_QUOTE}() got text with a NUL character, which no shell command can take")
    return shlex.quote(text)


FUNCTIONS: dict[str, Callable[..., Any]] = {SHELL_QUOTE: shell_quote}


@dataclass(frozen=True)
class FunctionCall:
    """One of graphrunner's functions over a path chain: `shell_quote(inputs.dir || ".")`."""

    name: str
    chain: Fallback
    source: str

    @property
    def roots(self) -> set[str]:
        """Namespaces the paths start from."""
        return self.chain.roots

    def evaluate(self, context: Mapping[str, Any]) -> Any:
        """The function of the chain's first present value."""
        value = self.chain.evaluate(context)
        try:
            return FUNCTIONS[self.name](value)
        except Exception as exc:
            raise evaluation_error(self.source, exc) from None


def parse_call(text: str) -> FunctionCall | None:
    """`text` as a call of one of graphrunner's functions on one path chain, or None."""
    name = called(text)
    if name is None:
        return None
    body = text.strip()
    chain = parse_fallback(body[body.index("(") + 1 : -1])
    return None if chain is None else FunctionCall(name, chain, body)


def called(text: str) -> str | None:
    """The name of graphrunner's function when the whole of the CEL text `text` is one call of
    it (`shell_quote(x)`, not `shell_quote(x) + y`), else None."""
    match = CALL.fullmatch(text.strip())
    if match is None or match.group(1) not in FUNCTIONS:
        return None
    return match.group(1) if _closes_at_end(without_strings(text.strip())) else None


def _closes_at_end(text: str) -> bool:
    """True when the first `(` of `text` is closed by its last character."""
    depth = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i == len(text) - 1
    return False
