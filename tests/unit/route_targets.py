"""Routing functions that `next: {fn: ...}` names in tests/unit/test_validation_codes.py."""

from __future__ import annotations

from typing import Any


def route(state: dict[str, Any]) -> str:
    """`done` when the state says `go`, else the end of the run."""
    return "done" if state.get("go") else "$end"
