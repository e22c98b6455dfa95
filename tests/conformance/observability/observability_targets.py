"""Python targets the observability fixtures name (the `python` tool); importable by the worker."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any

from graphrunner.errors import ToolError

LOGGER = "graphrunner.conformance.observability"  # the fixtures' log lines, captured by the test
_calls: Counter[str] = Counter()
_lock = threading.Lock()


def flaky(key: str, failures: int = 1) -> dict[str, Any]:
    """Fail (a transient error) the first `failures` calls for `key` (a run id), then succeed."""
    with _lock:
        _calls[key] += 1
        call = _calls[key]
    if call <= failures:
        raise ToolError(f"busy (call {call})", error_type="Busy", classification="transient")
    return {"calls": call}


def say(message: str) -> dict[str, Any]:
    """Log `message` at INFO (from inside a step: the line carries its run, trace and span)."""
    logging.getLogger(LOGGER).info(message)
    return {"said": message}
