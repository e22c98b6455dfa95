"""Static checks of CEL text that are sure to fail at run time: `x / 0`, `x % 0`, `[1, 2][5]`.

A small scan of the text (string literals blanked out first), not a type checker: it only
reports what is certain from the literals written, and never raises.
"""

from __future__ import annotations

import re

STRING_LITERAL = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'")
ZERO_DIVISOR = re.compile(r"(?<![/%])([/%])\s*(?:-\s*)?(?:0+(?:\.0*)?|\.0+|0[xX]0+)[uU]?(?![\w.])")
INDEXED_LIST = re.compile(r"\]\s*\[\s*(-?\d{1,18})\s*\]")
OPENERS = {"]": "[", ")": "(", "}": "{"}


def without_strings(source: str) -> str:
    """The CEL text `source` with every string literal emptied (what is inside is not CEL)."""
    return STRING_LITERAL.sub('""', source)


def constant_problems(source: str) -> list[tuple[str, str]]:
    """`(code, message)` for each certain failure in the CEL text `source`."""
    text = without_strings(source)
    verbs = {"/": "divides", "%": "takes a modulo"}
    problems = [
        ("constant_division_by_zero", f"{verbs[m.group(1)]} by a constant zero")
        for m in ZERO_DIVISOR.finditer(text)
    ]
    for match in INDEXED_LIST.finditer(text):
        size = _list_literal_size(text, match.start())
        index = int(match.group(1))
        if size is not None and not 0 <= index < size:
            problems.append(
                ("constant_index_out_of_range", f"reads index {index} of a literal list of {size} item(s)")
            )
    return problems


def _list_literal_size(text: str, close: int) -> int | None:
    """The item count of the list literal ending at `text[close]`, or None when it is not one."""
    start = _opening(text, close)
    if start is None or _indexes_something(text, start):
        return None
    inner = text[start + 1 : close]
    items = _split_top_level(inner)
    return len([item for item in items if item.strip()])


def _opening(text: str, close: int) -> int | None:
    """The index of the bracket that `text[close]` closes, or None when they do not pair up."""
    stack: list[str] = []
    for i in range(close, -1, -1):
        ch = text[i]
        if ch in OPENERS:
            stack.append(OPENERS[ch])
        elif ch in "[({":
            if not stack or stack.pop() != ch:
                return None
            if not stack:
                return i if ch == "[" else None
    return None


def _indexes_something(text: str, start: int) -> bool:
    """True when the `[` at `start` indexes a value (`x[0]`, `f()[1]`) rather than opening a list."""
    before = text[:start].rstrip()
    return bool(before) and (before[-1].isalnum() or before[-1] in "_)]\"'")


def _split_top_level(inner: str) -> list[str]:
    """`inner` split on the commas that are not nested in brackets."""
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in inner:
        if ch in "[({":
            depth += 1
        elif ch in "])}":
            depth -= 1
        if ch == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(ch)
    items.append("".join(current))
    return items
