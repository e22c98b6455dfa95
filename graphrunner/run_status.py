"""The lifecycle of a run: `RunStatus`, re-exported by `graphrunner.engine`.

It imports nothing of graphrunner, so the CLI lists the statuses in `graphrunner list --help`
without loading the engine and the graph model.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """The lifecycle of a run (DESIGN §3)."""

    PENDING = "pending"
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    COMPLETED_WITH_ERRORS = "completed_with_errors"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        """True for statuses a run never leaves on its own."""
        return self in FINISHED


FINISHED = frozenset(
    {RunStatus.COMPLETED, RunStatus.COMPLETED_WITH_ERRORS, RunStatus.FAILED, RunStatus.CANCELLED}
)
STATUSES = tuple(s.value for s in RunStatus)
