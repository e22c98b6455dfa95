"""`RunResult`: how a finished (or paused) run is reported, by the Python API and the CLI."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graphrunner.engine import RunFailure, RunSnapshot, RunStatus, ToleratedError
from graphrunner.engine.snapshot import PausedAt
from graphrunner.errors import RUN_ERROR_CLASSES, BranchFailed, NodeError, ReducerError, RunError


@dataclass(frozen=True)
class RunResult:
    """The fields of DESIGN §5, plus the transcript and the final snapshot; `message` is the pause
    node's message while the run is paused (None otherwise).

    `error` is why a failed run failed, a `RunFailure` (`error.type`, `error.message`,
    `error.node`, `error.step`, `error.traceback`, ...; None unless the run failed), and
    `errors` the errors a run went on past (`ToleratedError`: `step`, `node`, `error`). Their
    JSON form is `error.to_dict()`, and `to_dict()` gives the whole result as JSON data.
    """

    run_id: str
    graph_id: str
    status: str
    output: Any
    state: dict[str, Any]
    path: list[str]
    step_count: int
    errors_suppressed: int
    errors: list[ToleratedError]
    error: RunFailure | None
    message: str | None = None
    steps: list[dict[str, Any]] = field(default_factory=list, repr=False)
    snapshot: RunSnapshot | None = field(default=None, repr=False, compare=False)
    exception: RunError | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_snapshot(
        cls,
        snap: RunSnapshot,
        steps: list[dict[str, Any]] | None = None,
        exception: RunError | None = None,
    ) -> RunResult:
        """The result of a run in the state `snap`."""
        return cls(
            run_id=snap.run_id,
            graph_id=snap.graph_id,
            status=snap.status.value,
            output=snap.output,
            state=dict(snap.state),
            path=list(snap.path),
            step_count=snap.step,
            errors_suppressed=len(snap.errors),
            errors=list(snap.errors),
            error=snap.error,
            message=snap.pause_message if snap.status is RunStatus.PAUSED else None,
            steps=steps or [],
            snapshot=snap,
            exception=exception,
        )

    @property
    def ok(self) -> bool:
        """True for `completed` and `completed_with_errors`."""
        return self.status in ("completed", "completed_with_errors")

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of `run --json` (DESIGN §5), with `message` when a paused run has one."""
        result = {
            "run_id": self.run_id,
            "graph_id": self.graph_id,
            "status": self.status,
            "output": self.output,
            "state": self.state,
            "step_count": self.step_count,
            "path": self.path,
            "errors_suppressed": self.errors_suppressed,
            "errors": [e.model_dump(mode="json") for e in self.errors],
            "error": self.error.to_dict() if self.error is not None else None,
        }
        if self.message is not None:
            result["message"] = self.message
        if self.paused_at is not None:
            result["paused_at"] = self.paused_at.model_dump(mode="json")
        return result

    @property
    def paused_at(self) -> PausedAt | None:
        """A run paused because a run below it paused: where (its child run, branch or item)."""
        snap = self.snapshot
        return snap.paused_at if snap is not None and self.status == "paused" else None

    def raise_for_error(self) -> RunResult:
        """Raise the run's error (`NodeError`, `ReducerError`, ...) with its state; else self."""
        if self.status != "failed" or self.error is None:
            return self
        cls = RUN_ERROR_CLASSES.get(self.error.type, NodeError)
        if self.exception is not None and isinstance(self.exception, cls):
            raise self.exception
        raise _rebuild(cls, self) from self.exception  # e.g. a denied action: PermissionDenied


def _rebuild(cls: type[RunError], result: RunResult) -> RunError:
    """The typed error of a failed result that no longer holds its exception object."""
    error = result.error
    assert error is not None  # only a failed result with an error is rebuilt
    kwargs: dict[str, Any] = {"node": error.node, "step": error.step, "state": result.state}
    if issubclass(cls, ReducerError):
        return cls(error.message, field=error.field or "?", reducer=error.reducer or "?", **kwargs)
    if issubclass(cls, BranchFailed):
        return cls(error.message, branch=error.branch, index=error.index, **kwargs)
    return cls(error.message, category=error.type, **kwargs)
