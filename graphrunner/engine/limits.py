"""The state size limit (DESIGN §7): a run's state, JSON-encoded as the store writes it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from graphrunner.errors import LimitExceeded

SETTING = "GRAPHRUNNER_MAX_STATE_BYTES"


def encoded_size(value: Any) -> int:
    """The size in bytes of `value` as JSON (ASCII-escaped, so characters are bytes)."""
    return len(json.dumps(value, default=str))


def over_limit(value: Mapping[str, Any], limit: int | None) -> int | None:
    """The encoded size of `value` when it exceeds `limit` bytes, else None (also without a limit)."""
    if limit is None:
        return None
    size = encoded_size(value)
    return size if size > limit else None


def check_size(value: Mapping[str, Any], limit: int | None, what: str) -> None:
    """Raise `LimitExceeded` when `value` (`what`: "the inputs", "the initial state", ...) is too big."""
    size = over_limit(value, limit)
    if size is not None:
        raise LimitExceeded(f"{what} is {size} bytes as JSON, over the limit of {limit} bytes ({SETTING})")
