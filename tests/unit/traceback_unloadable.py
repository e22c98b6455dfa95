"""A module whose own code fails while it is imported (tests/unit/test_tracebacks.py)."""

from __future__ import annotations


def settings() -> dict[str, str]:
    """What the module reads at import time: it fails."""
    raise LookupError("no settings file")


SETTINGS = settings()


def f() -> int:
    """Never reached: the module does not load."""
    return 1
