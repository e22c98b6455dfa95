"""Values and exceptions as short text for messages (bounded in length and depth, never raising),
and what makes a Python string not valid Unicode."""

from __future__ import annotations

import re
import reprlib
from typing import Any

SURROGATE = re.compile("[\ud800-\udfff]")  # a surrogate code point: in a str, not valid Unicode

_SHORT = reprlib.Repr()
_SHORT.maxstring = 40
_SHORT.maxother = 40
_SHORT.maxlong = 40
_SHORT.maxlevel = 3


def describe(value: Any) -> str:
    """A short repr of any value for a message: bounded in length and depth, never raises."""
    try:
        return _SHORT.repr(value)
    except Exception:  # a huge int, a broken __repr__: say what it is instead
        return f"<{type(value).__name__}>"


def first_line(text: str) -> str:
    """The first non-blank line of `text` (empty for blank text)."""
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else ""
