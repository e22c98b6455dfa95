"""How a value reads inside text: what `"id-${state.n}"` and `shell_quote` make of a value."""

from __future__ import annotations

import json
from typing import Any


def render_text(value: Any) -> str:
    """How a value reads inside text: null is empty, booleans lower-case, structures JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), default=str)
    return str(value)
