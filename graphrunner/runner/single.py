"""Single step (DESIGN §3): run one node against a given state in this process, touching no run.

The step is the in-process runner's own step (`LocalRunner.advance`), taken from a snapshot
that starts at the chosen node: the same planning, dispatch, retries, reducers, routing and
error handling as in a run. No store is involved: nothing is created, read or written in
Redis. Foreach nodes run their items here; a subgraph node runs its child graph to the end
here. A graph's `error` hooks run (they may decide the step's outcome); `graph_started`,
`after_step` and `graph_completed` hooks do not, as no run starts or ends.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graphrunner import engine
from graphrunner.compiled import CompiledGraph
from graphrunner.engine import RunFailure, RunSnapshot, RunStatus
from graphrunner.engine.state import check_state, initial_state
from graphrunner.errors import ResumeError, StateValidationError, UnknownNode
from graphrunner.runner.local import LocalRunner
from graphrunner.services.records import utcnow
from graphrunner.settings import Settings

if TYPE_CHECKING:
    from graphrunner.tools import ToolRegistry


@dataclass(frozen=True)
class StepReport:
    """What one node did: the state after it, the node that ran, and the node that would run next.

    `status` is the status the step leaves a run in: `running` (it goes on at `next_node`),
    `paused`, `completed`, `completed_with_errors` or `failed`. `error` is the step's error, a
    `RunFailure` (also when `on_error` or `error_mode: continue` handled it), else None; its JSON
    form is `error.to_dict()`. `step_count` is the number of steps taken: always 1.
    """

    state: dict[str, Any]
    executed_node: str
    next_node: str | None
    step_count: int
    status: str
    error: RunFailure | None = None
    steps: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def ok(self) -> bool:
        """False when the step failed the run (a handled error is ok)."""
        return self.status != RunStatus.FAILED

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of `graphrunner step --json`."""
        return {
            "state": self.state,
            "executed_node": self.executed_node,
            "next_node": self.next_node,
            "step_count": self.step_count,
            "status": self.status,
            "error": self.error.to_dict() if self.error is not None else None,
        }


async def single_step(
    graph: CompiledGraph,
    node: str,
    state: Mapping[str, Any] | None = None,
    *,
    inputs: Mapping[str, Any] | None = None,
    capabilities: Sequence[str] | None = None,
    registry: ToolRegistry | None = None,
    settings: Settings | None = None,
) -> StepReport:
    """Run `node` once against `state` (over the declared defaults); raises before running on bad input.

    Raises `UnknownNode`; `StateValidationError` naming the state fields or inputs that fail the
    graph's schema; `LimitExceeded` for a state over the size limit; `InvalidCapabilities`.
    A node that fails is reported in the result, not raised. Without `capabilities` the step
    gets a local run's (`Settings.local_capabilities`); `settings` defaults to the environment's.
    """
    settings = settings or Settings.from_env()
    runner = LocalRunner.from_settings(settings, registry=registry)
    caps = runner.services.default_capabilities if capabilities is None else capabilities
    snap = start_at(graph, node, state, inputs, caps, settings.max_state_bytes)
    _, result, records = await runner.advance(graph, snap)
    after = result.snapshot
    return StepReport(
        state=dict(after.state),
        executed_node=node,
        next_node=next_node(graph, after),
        step_count=after.step,
        status=after.status.value,
        error=result.event.error,
        steps=[r.to_dict() for r in records],
    )


def single_step_sync(
    graph: CompiledGraph, node: str, state: Mapping[str, Any] | None = None, **kwargs: Any
) -> StepReport:
    """`single_step` for synchronous code (not from inside a running event loop)."""
    return asyncio.run(single_step(graph, node, state, **kwargs))


def start_at(
    graph: CompiledGraph,
    node: str,
    state: Mapping[str, Any] | None,
    inputs: Mapping[str, Any] | None,
    capabilities: Sequence[str],
    max_state_bytes: int | None = None,
) -> RunSnapshot:
    """A fresh snapshot at `node`, its state `state` over the declared defaults, checked."""
    if node not in graph.nodes:
        known = ", ".join(sorted(graph.nodes))
        raise UnknownNode(f"graph '{graph.id}' has no node '{node}'; its nodes: {known}")
    if state is not None and not isinstance(state, Mapping):
        raise StateValidationError(
            f"state must be a mapping of field to value, got {type(state).__name__}", fields=[]
        )
    check_state(graph.spec, initial_state(graph.spec, state), f"node '{node}' of graph '{graph.id}'")
    snap = engine.begin(
        graph,
        inputs,
        run_id=f"step-{uuid.uuid4().hex}",
        state=state,
        capabilities=capabilities,
        max_state_bytes=max_state_bytes,
    )
    return snap.model_copy(update={"node": node})


def next_node(graph: CompiledGraph, snap: RunSnapshot) -> str | None:
    """The node the next step would run: None when the run ended; for a pause, where a resume
    without a state patch would continue (None when that resume would end the run or fail)."""
    if snap.status is RunStatus.RUNNING:
        return snap.node
    if snap.status is not RunStatus.PAUSED:
        return None
    try:
        return engine.resume(graph, snap, utcnow()).node
    except ResumeError:
        return None
