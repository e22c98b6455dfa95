"""Python targets the conformance fixtures name (routing functions); importable by the worker."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def to_ghost(state: Mapping[str, Any]) -> str:
    """An edge that returns a name that is neither a node nor END (OpenArmature 008)."""
    return "ghost"
