"""Split a string into literal text and `${...}` expressions (`$${` writes a literal `${`)."""

from __future__ import annotations

from graphrunner.errors import ExpressionError

Part = tuple[bool, str]  # (is_expression, text)


def split_template(text: str) -> list[Part]:
    """Literal and expression parts of `text`, in order; raises on an unclosed `${`."""
    parts: list[Part] = []
    literal: list[str] = []
    i = 0
    while i < len(text):
        if text.startswith("$${", i):
            literal.append("${")
            i += 3
        elif text.startswith("${", i):
            end = _closing_brace(text, i + 2)
            if literal:
                parts.append((False, "".join(literal)))
                literal = []
            body = text[i + 2 : end].strip()
            if not body:
                raise ExpressionError(f"empty expression '${{}}' in {text!r}", text)
            parts.append((True, body))
            i = end + 1
        else:
            literal.append(text[i])
            i += 1
    if literal:
        parts.append((False, "".join(literal)))
    return parts


def has_expression(text: str) -> bool:
    """True when `text` holds a `${...}` (escaped `$${` does not count)."""
    return "${" in text.replace("$${", "")


def _closing_brace(text: str, start: int) -> int:
    """Index of the `}` closing an expression body, skipping nested braces and strings."""
    depth = 0
    i = start
    while i < len(text):
        ch = text[i]
        if ch in "\"'":
            i = _string_end(text, i)
        elif ch == "{":
            depth += 1
        elif ch == "}":
            if depth == 0:
                return i
            depth -= 1
        i += 1
    raise ExpressionError(f"unclosed '${{' in {text!r}", text)


def _string_end(text: str, start: int) -> int:
    quote = text[start]
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            return i
        i += 1
    raise ExpressionError(f"unterminated string literal in {text!r}", text)
