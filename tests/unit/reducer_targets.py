"""Custom reducers referenced as `reducer_targets:NAME` in tests/unit/test_reducers.py."""

from __future__ import annotations

from typing import Any

NOT_CALLABLE = 42


def keep_max(prior: Any, update: Any) -> Any:
    """The larger of prior and update (prior None counts as absent)."""
    return update if prior is None else max(prior, update)


def sorted_union(prior: Any, update: Any) -> list[Any]:
    """The sorted union of two lists, without mutating either."""
    return sorted(set(prior or []) | set(update))
