"""`next`: a node name, a list of branches, Rye's `{type: ...}` mappings, or `{fn: ...}`.

Every form is normalised into one `Next`: an ordered tuple of branches (the first whose
`when` holds wins; a branch without `when` is the default), or a routing function.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from graphrunner.model.base import Model
from graphrunner.model.conditions import Condition

NEXT_FORMS = (
    "a node name, a list of branches [{to, when}], "
    "{type: unconditional, to}, {type: conditional, branches}, or {fn: 'pkg.module:route'}"
)


class Branch(Model):
    """Route to `to` (a node name or `$end`) when `when` holds, or always without `when`."""

    to: str = Field(min_length=1)
    when: Condition | None = None


class Next(Model):
    """The normalised outgoing edge of a node."""

    branches: tuple[Branch, ...] = ()
    fn: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"branches": [{"to": data}]}
        if isinstance(data, list):
            return {"branches": data}
        if not isinstance(data, dict):
            raise ValueError(f"next must be {NEXT_FORMS}")
        if "branches" in data and "type" not in data:
            return data
        return _mapping_form(data)

    @property
    def targets(self) -> tuple[str, ...]:
        """Every static target named by the branches."""
        return tuple(b.to for b in self.branches)


def _mapping_form(data: dict[str, Any]) -> dict[str, Any]:
    if "fn" in data:
        extra = set(data) - {"fn"}
        if extra:
            raise ValueError(f"next with 'fn' takes no other key, got {_names(extra)}")
        return {"fn": data["fn"]}
    kind = data.get("type")
    if kind == "unconditional":
        _only(data, {"type", "to"})
        return {"branches": [{"to": data.get("to")}]}
    if kind == "conditional":
        _only(data, {"type", "branches", "default"})
        branches = data.get("branches") or []
        if not isinstance(branches, list):
            raise ValueError(f"next of type 'conditional' needs a list of branches, got {branches!r:.60}")
        branches = list(branches)
        if data.get("default") is not None:
            branches.append({"to": data["default"]})
        return {"branches": branches}
    if "to" in data:
        return {"branches": [data]}
    raise ValueError(f"next must be {NEXT_FORMS}")


def _only(data: dict[str, Any], allowed: set[str]) -> None:
    extra = set(data) - allowed
    if extra:
        raise ValueError(
            f"next of type {data.get('type')!r:.40} takes {sorted(allowed)}, unknown key(s) {_names(extra)}"
        )


def _names(keys: set[Any]) -> list[str]:
    """Keys as sorted text (YAML keys may be numbers or null, which do not sort with strings)."""
    return sorted(str(k) for k in keys)
