"""A run as the engine sees it between steps: an immutable, JSON-serialisable snapshot."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, field_validator

from graphrunner.engine.failures import ForkLink, ParentLink, RunFailure, ToleratedError
from graphrunner.engine.schedule_link import ScheduleLink
from graphrunner.engine.trace_link import TraceLink
from graphrunner.engine.waiting import Wait
from graphrunner.run_status import FINISHED as FINISHED
from graphrunner.run_status import RunStatus as RunStatus


class PausedAt(BaseModel):
    """Where a run paused below this one: its child run (`run_id`, with the branch or item
    `index` it is), and the run parked at a pause node (`paused_run`, `node`, `message`), at
    any depth below."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    branch: str | None = None
    index: int | None = None
    paused_run: str
    node: str | None = None
    message: str | None = None

    @classmethod
    def of_child(cls, child: RunSnapshot, branch: str | None = None, index: int | None = None) -> PausedAt:
        """Where the paused child run `child` (a branch, an item `index`, or a subgraph's child) paused."""
        below = child.paused_at
        return cls(
            run_id=child.run_id,
            branch=branch,
            index=index,
            paused_run=below.paused_run if below is not None else child.run_id,
            node=below.node if below is not None else (child.path[-1] if child.path else child.node),
            message=child.pause_message,
        )


class RunSnapshot(BaseModel):
    """Everything the next step needs: where the run is, its state and what happened so far."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    graph_id: str
    graph_hash: str = ""
    inputs: dict[str, Any] = Field(default_factory=dict)
    state: dict[str, Any] = Field(default_factory=dict)
    node: str | None = None
    step: int = 0
    status: RunStatus = RunStatus.RUNNING
    path: tuple[str, ...] = ()
    errors: tuple[ToleratedError, ...] = ()  # what error_mode `continue` went on past
    error: RunFailure | None = None
    output: Any = None
    depth: int = 0
    max_depth: int | None = None  # the deepest its children may nest (a caller's `depth`), if bounded
    capabilities: tuple[str, ...] = ("*",)
    # a step that waits (retry backoff, durable sleep, foreach items, a child run) is
    # suspended: `phase` counts its suspensions (the commit fence), `wait` says what for
    phase: int = 0
    wait: SerializeAsAny[Wait] | None = None
    parent: ParentLink | None = None  # the step that started this child run
    children: tuple[str, ...] = ()
    concurrency_key: str | None = None  # at most one active run per key (DESIGN §3)
    pause_message: str | None = None  # the `message` of the pause node a paused run is parked at
    paused_at: PausedAt | None = None  # a run paused because a run below it paused: where
    forked_from: ForkLink | None = None  # the run and step this run was forked from (DESIGN §12)
    trace: TraceLink | None = None  # where its spans hang in its OpenTelemetry trace (DESIGN §11)
    schedule: ScheduleLink | None = None  # the schedule and tick that started it (DESIGN §12)

    @field_validator("wait", mode="before")
    @classmethod
    def _wait_of_its_kind(cls, value: Any) -> Any:
        return Wait.parse(value) if isinstance(value, dict) else value

    def run_namespace(self) -> dict[str, Any]:
        """The `run` expression namespace: id, graph id and the step being taken."""
        return {"id": self.run_id, "graph_id": self.graph_id, "step": self.step + 1}


class StepEvent(BaseModel):
    """What one step did, for the transcript (the runner adds timing and worker)."""

    model_config = ConfigDict(frozen=True)

    step: int
    node: str
    status: str  # ok | error | end | paused
    next_node: str | None = None
    changed_keys: tuple[str, ...] = ()
    error: RunFailure | None = None
    cache_hit: bool = False
    attempts: int = 1
    message: str | None = None  # a pause node's `message` (a paused step)
