"""What the runner tells the engine after doing the I/O of a step."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Control = Literal["retry", "continue", "fail"]


@dataclass(frozen=True)
class ActionFailure:
    """A classified action error: transient, timeout, permission_denied, validation, permanent."""

    classification: str
    message: str
    error_type: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The error as recorded in state, transcript and results."""
        return {"type": self.classification, "error_type": self.error_type, "message": self.message}


@dataclass(frozen=True)
class ActionOutcome:
    """An action's result, or its failure after retries, and any control answer of a hook."""

    result: Any = None
    failure: ActionFailure | None = None
    attempts: int = 1
    cache_hit: bool = False
    control: Control | None = None
    retries: tuple[dict[str, Any], ...] = ()  # the failed attempts that were retried

    @property
    def ok(self) -> bool:
        """True when the action succeeded."""
        return self.failure is None


@dataclass(frozen=True)
class ItemOutcome:
    """One foreach item: its index, the item, and its outcome."""

    index: int
    item: Any
    outcome: ActionOutcome


@dataclass(frozen=True)
class ForeachOutcome:
    """Every item of a foreach, in item order."""

    items: tuple[ItemOutcome, ...] = ()
    control: Control | None = None
    attempts: int = 1


@dataclass(frozen=True)
class ChildOutcome:
    """A finished child run of a subgraph node."""

    status: str
    state: dict[str, Any] = field(default_factory=dict)
    output: Any = None
    error: dict[str, Any] | None = None
    control: Control | None = None


@dataclass(frozen=True)
class NoOutcome:
    """For nodes that do no I/O: gate, pause, return, and a limit reached."""

    control: Control | None = None


Outcome = ActionOutcome | ForeachOutcome | ChildOutcome | NoOutcome
