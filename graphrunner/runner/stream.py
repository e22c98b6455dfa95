"""Streaming an in-process run (`Graph.stream`, `Graph.astream`): the events a cluster run's
stream yields (graphrunner/streaming.py), taken from the runner as each step completes."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any

from graphrunner.compiled import CompiledGraph
from graphrunner.engine import RunSnapshot, StepPlan, StepResult
from graphrunner.results import RunResult
from graphrunner.runner.local import LocalRunner
from graphrunner.services import StepServices
from graphrunner.services.records import AnyRecord, changes
from graphrunner.settings import Settings
from graphrunner.streaming import RecordEvent, ResultEvent, StateEvent, StreamEvent, StreamMode, check_mode
from graphrunner.tools import ToolRegistry


class StreamingRunner(LocalRunner):
    """A `LocalRunner` that hands the events of one run (not of its child runs) to `emit`."""

    def __init__(
        self, services: StepServices, run_id: str, mode: StreamMode, emit: Callable[[StreamEvent], None]
    ) -> None:
        super().__init__(services)
        self.run_id, self.values, self.emit = run_id, mode == "values", emit

    async def drive(self, graph: CompiledGraph, snap: RunSnapshot) -> RunResult:
        """Take steps from `snap` (in mode `values`, the run's first state is an event)."""
        if self.values and snap.run_id == self.run_id:
            self.emit(StateEvent.of(snap))
        return await super().drive(graph, snap)

    async def advance(
        self, graph: CompiledGraph, snap: RunSnapshot, worker: str = "local"
    ) -> tuple[StepPlan, StepResult, list[AnyRecord]]:
        """Take one step from `snap`; its records are events, with the state after the step."""
        plan, result, records = await super().advance(graph, snap, worker)
        if snap.run_id == self.run_id:
            for i, record in enumerate(records):  # retried attempts first: the state is the one before
                after = result.snapshot.state if i == len(records) - 1 else snap.state
                self.emit(self._event(record, after))
        return plan, result, records

    def _event(self, record: AnyRecord, after: dict[str, Any]) -> RecordEvent:
        updates = {k: after[k] for k in changes(record)[0] if k in after}
        return RecordEvent.of(self.run_id, record, updates, state=dict(after) if self.values else None)


async def astream(
    graph: CompiledGraph,
    inputs: Mapping[str, Any] | None = None,
    *,
    mode: str = "updates",
    state: Mapping[str, Any] | None = None,
    run_id: str | None = None,
    capabilities: Sequence[str] | None = None,
    registry: ToolRegistry | None = None,
) -> AsyncIterator[StreamEvent]:
    """Run `graph` in this process, yielding its events as its steps complete, then its result."""
    run_id = run_id or uuid.uuid4().hex
    queue: asyncio.Queue[StreamEvent | None] = asyncio.Queue()
    services = StepServices.from_settings(Settings.from_env(), registry)
    runner = StreamingRunner(services, run_id, check_mode(mode), queue.put_nowait)
    task = asyncio.ensure_future(
        runner.invoke(graph, inputs, state=state, run_id=run_id, capabilities=capabilities)
    )
    task.add_done_callback(lambda _: queue.put_nowait(None))
    try:
        while (event := await queue.get()) is not None:
            yield event
        yield ResultEvent(task.result())
    finally:
        if not task.done():  # the caller stopped listening: stop the run
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def iterate(events: AsyncIterator[StreamEvent]) -> Iterator[StreamEvent]:
    """`events` for synchronous code, on an event loop of its own (not inside a running one)."""
    with asyncio.Runner() as loop:
        try:
            while True:
                try:
                    yield loop.run(_next(events))
                except StopAsyncIteration:
                    return
        finally:
            loop.run(_close(events))


async def _next(events: AsyncIterator[StreamEvent]) -> StreamEvent:
    return await anext(events)


async def _close(events: AsyncIterator[StreamEvent]) -> None:
    close = getattr(events, "aclose", None)
    if close is not None:
        await close()
