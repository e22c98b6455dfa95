"""What the runner tells the engine after doing the I/O of a step."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from graphrunner.engine.failures import RunFailure
from graphrunner.engine.snapshot import PausedAt

Control = Literal["retry", "continue", "fail"]
FINISHED_OK = ("completed", "completed_with_errors")
CHILD_ERROR_TYPES = {"limit_exceeded": "LimitExceeded", "permission_denied": "PermissionDenied"}


@dataclass(frozen=True)
class ActionFailure:
    """A classified action error: transient, timeout, permission_denied, validation, permanent;
    with the traceback of the exception behind it, when there is one worth keeping."""

    classification: str
    message: str
    error_type: str | None = None
    traceback: str | None = None
    branch: str | None = None  # a failed parallel branch (`branch_failed`)
    index: int | None = None  # a failed foreach child (`branch_failed`)

    def to_dict(self, *, traceback: bool = True) -> dict[str, Any]:
        """The error as recorded in transcript and results: `{type, error_type, message}`, and
        `traceback` when there is one (`traceback=False`: never, for what goes into state)."""
        error = {"type": self.classification, "error_type": self.error_type, "message": self.message}
        if traceback and self.traceback:
            error["traceback"] = self.traceback
        return error

    def to_run_failure(
        self, node: str | None = None, step: int | None = None, *, traceback: bool = True
    ) -> RunFailure:
        """The failure as a run's or a step's error, at `node` and `step` (`traceback=False`:
        without the traceback, for a run's tolerated `errors`)."""
        return RunFailure(
            type=self.classification,
            message=self.message,
            node=node,
            step=step,
            error_type=self.error_type,
            traceback=self.traceback if traceback else None,
            branch=self.branch,
            index=self.index,
        )

    @classmethod
    def from_dict(cls, error: dict[str, Any]) -> ActionFailure:
        """The failure `to_dict` recorded (a missing type is `permanent`)."""
        return cls(
            error.get("type") or "permanent",
            error.get("message", ""),
            error.get("error_type"),
            error.get("traceback"),
        )


@dataclass(frozen=True)
class Retried:
    """A failed attempt of an action that was tried again `retry_in_s` seconds later."""

    attempt: int
    failure: ActionFailure
    retry_in_s: float


@dataclass(frozen=True)
class ActionOutcome:
    """An action's result, or its failure after retries, and any control answer of a hook."""

    result: Any = None
    failure: ActionFailure | None = None
    attempts: int = 1
    cache_hit: bool = False
    control: Control | None = None
    retries: tuple[Retried, ...] = ()  # the failed attempts that were retried

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
    paused: PausedAt | None = None  # its child run paused: where (the item is not done)


@dataclass
class ItemsFold:
    """A foreach's items reduced in item order as they come (a join reading them a page at a time
    never holds every outcome): how many, the results of those that succeeded, the failed ones,
    and the most attempts any took."""

    count: int = 0
    results: list[Any] = field(default_factory=list)
    failed: list[ItemOutcome] = field(default_factory=list)
    attempts: int = 1

    def add(self, index: int, item: Any, outcome: ActionOutcome) -> None:
        """Fold in item `index` (the next in item order)."""
        self.count += 1
        self.attempts = max(self.attempts, outcome.attempts)
        if outcome.ok:
            self.results.append(outcome.result)
        else:
            self.failed.append(ItemOutcome(index, item, outcome))

    @classmethod
    def of(cls, items: Iterable[ItemOutcome]) -> ItemsFold:
        """The fold of `items`, in item order."""
        fold = cls()
        for item in items:
            fold.add(item.index, item.item, item.outcome)
        return fold


@dataclass(frozen=True)
class ForeachOutcome:
    """Every item of a foreach, in item order: as `items`, or already `folded` (a cluster's join)."""

    items: tuple[ItemOutcome, ...] = ()
    control: Control | None = None
    attempts: int = 1
    folded: ItemsFold | None = None

    def fold(self) -> ItemsFold:
        """The items folded in item order."""
        return self.folded if self.folded is not None else ItemsFold.of(self.items)


@dataclass(frozen=True)
class ChildOutcome:
    """A finished child run of a subgraph node, a parallel branch or a foreach item."""

    status: str
    state: dict[str, Any] = field(default_factory=dict)
    output: Any = None
    error: RunFailure | None = None
    control: Control | None = None
    message: str | None = None  # a paused child's pause message
    paused_at: PausedAt | None = None  # a paused child: where it (or a run below it) paused

    @property
    def ok(self) -> bool:
        """True when the child completed (with or without suppressed errors)."""
        return self.status in FINISHED_OK

    def failure(self, label: str) -> ActionFailure:
        """The child's end as the failure of the node that ran it (`label`: what it was)."""
        error = self.error
        kind = error.type if error is not None else None
        # a limit (e.g. nesting deeper than max_depth) or a denied dispatch keeps its category
        classification = kind if kind in ("limit_exceeded", "permission_denied") else "permanent"
        return ActionFailure(
            classification,
            f"{label} ended {self.status}: {error.message if error is not None else 'no error recorded'}",
            CHILD_ERROR_TYPES.get(classification, "SubgraphFailed"),
            error.traceback if error is not None else None,
        )

    def as_item(self, index: int, item: Any, label: str) -> ItemOutcome:
        """A foreach item run as this child: its output is the item's result."""
        if self.paused_at is not None:
            failure = ActionFailure("permanent", f"{label} paused", "ChildPaused")
            return ItemOutcome(index, item, ActionOutcome(failure=failure), paused=self.paused_at)
        if self.ok:
            return ItemOutcome(index, item, ActionOutcome(result=self.output))
        return ItemOutcome(index, item, ActionOutcome(failure=self.failure(label)))


@dataclass(frozen=True)
class BranchOutcome:
    """One branch of a parallel node: its name and its child run's end."""

    name: str
    child: ChildOutcome


@dataclass(frozen=True)
class ParallelOutcome:
    """Every branch of a parallel node that ran, in declaration order; `failed_first` names the
    branch whose failure stopped the others (fail_fast)."""

    branches: tuple[BranchOutcome, ...] = ()
    failed_first: str | None = None
    control: Control | None = None


@dataclass(frozen=True)
class NoOutcome:
    """For nodes that do no I/O: gate, pause, return, and a limit reached."""

    control: Control | None = None


Outcome = ActionOutcome | ForeachOutcome | ChildOutcome | ParallelOutcome | NoOutcome
