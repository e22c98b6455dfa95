"""Dotted paths with list indices (`state.items.0.name`) and `||` fallback chains."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from graphrunner.expressions.failures import evaluation_error
from graphrunner.text import SURROGATE

SEGMENT = r"(?:[A-Za-z_][A-Za-z0-9_-]*|\d+)"
PATH = re.compile(rf"^[A-Za-z_][A-Za-z0-9_]*(?:\.{SEGMENT})*$")
LITERAL = re.compile(r"""^(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|-?\d+(?:\.\d+)?|true|false|null)$""")
KEYWORDS = frozenset({"true", "false", "null"})


def parse_path(text: str) -> tuple[str, ...] | None:
    """The segments of a dotted path, or None when `text` is not one."""
    text = text.strip()
    if not PATH.match(text) or text.split(".")[0] in KEYWORDS:
        return None
    return tuple(text.split("."))


def resolve(context: Mapping[str, Any], segments: Sequence[str]) -> Any:
    """The value at `segments`, or None where any step is missing."""
    value: Any = context
    for seg in segments:
        if isinstance(value, Mapping):
            value = value.get(seg)
        elif isinstance(value, list | tuple) and seg.isdigit():
            index = int(seg)
            value = value[index] if index < len(value) else None
        else:
            return None
        if value is None:
            return None
    return value


@dataclass(frozen=True)
class Fallback:
    """`a || b || "default"`: the first path whose value is not null, else the literal."""

    choices: tuple[tuple[str, ...] | Any, ...]
    literal_flags: tuple[bool, ...]
    source: str = ""

    @property
    def roots(self) -> set[str]:
        """Namespaces the paths start from."""
        return {c[0] for c, lit in zip(self.choices, self.literal_flags, strict=True) if not lit}

    def evaluate(self, context: Mapping[str, Any]) -> Any:
        """The first present value (`false` and `0` count as present)."""
        try:
            for choice, is_literal in zip(self.choices, self.literal_flags, strict=True):
                value = choice if is_literal else resolve(context, choice)
                if value is not None:
                    return value
        except Exception as exc:
            raise evaluation_error(self.source, exc) from None
        return None


def parse_fallback(text: str) -> Fallback | None:
    """A path, or a `||` chain of paths ending optionally in literals; None for anything else."""
    pieces = [p.strip() for p in _split_or(text)]
    choices: list[Any] = []
    flags: list[bool] = []
    for piece in pieces:
        path = parse_path(piece)
        if path is not None:
            choices.append(path)
            flags.append(False)
        else:
            value = _literal(piece) if LITERAL.match(piece) and len(pieces) > 1 else _NOT_A_VALUE
            if value is _NOT_A_VALUE:
                return None
            choices.append(value)
            flags.append(True)
    if not any(not f for f in flags):
        return None
    return Fallback(tuple(choices), tuple(flags), text.strip())


_NOT_A_VALUE = object()


def _literal(text: str) -> Any:
    """The JSON value of a literal; `_NOT_A_VALUE` for one JSON or Python cannot take
    (a bad escape, an integer too long, an unpaired surrogate), which CEL then reports."""
    try:
        value = json.loads(_double_quoted(text) if text.startswith("'") else text)
    except ValueError:
        return _NOT_A_VALUE
    if isinstance(value, str) and SURROGATE.search(value):
        return _NOT_A_VALUE
    return value


def _double_quoted(text: str) -> str:
    """The single-quoted literal `text` (`'it\\'s'`) as a JSON string (`"it's"`)."""
    out, i = ['"'], 1
    while i < len(text) - 1:
        ch = text[i]
        if ch == "\\" and text[i + 1] == "'":
            out.append("'")
            i += 2
            continue
        if ch == "\\":
            out.append(text[i : i + 2])
            i += 2
            continue
        out.append('\\"' if ch == '"' else ch)
        i += 1
    return "".join(out) + '"'


def _split_or(text: str) -> list[str]:
    """Split on `||` outside string literals."""
    out, current, quote, i = [], [], "", 0
    while i < len(text):
        ch = text[i]
        if quote:
            current.append(ch)
            if ch == "\\" and i + 1 < len(text):
                current.append(text[i + 1])
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
            current.append(ch)
        elif text.startswith("||", i):
            out.append("".join(current))
            current = []
            i += 1
        else:
            current.append(ch)
        i += 1
    out.append("".join(current))
    return out
