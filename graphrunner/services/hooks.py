"""Firing hooks: a graph's own (which may answer), then the deployment's (which only observe)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from graphrunner import engine
from graphrunner.compiled import CompiledGraph, CompiledHook
from graphrunner.engine import ActionCall, ActionOutcome, RunSnapshot
from graphrunner.engine.capabilities import denied
from graphrunner.services.records import utcnow
from graphrunner.tools import ToolContext

log = logging.getLogger("graphrunner.hooks")
Call = Callable[[RunSnapshot, ActionCall, ToolContext], Awaitable[ActionOutcome]]


class Hooks:
    """Dispatches the hooks of an event with `call`; the deployment's hooks run after the graph's."""

    def __init__(self, call: Call, deployment: Sequence[CompiledHook] = ()) -> None:
        self.call = call
        self.deployment = tuple(deployment)

    async def fire(self, graph: CompiledGraph, event: str, snap: RunSnapshot, **data: Any) -> list[Any]:
        """Dispatch `event`'s hooks; returns the graph hooks' results (a failing hook is logged)."""
        answers = await self._fire(graph.hooks, event, snap, data, f"graph {graph.id}", checked=True)
        await self._fire(self.deployment, event, snap, data, "the deployment")
        return answers

    async def _fire(
        self,
        hooks: Sequence[CompiledHook],
        event: str,
        snap: RunSnapshot,
        data: dict[str, Any],
        owner: str,
        checked: bool = False,
    ) -> list[Any]:
        """Dispatch the hooks; with `checked` (a graph's own) only those the run's capabilities allow."""
        answers: list[Any] = []
        if not hooks:
            return answers
        for call in engine.hook_calls(hooks, event, snap, utcnow(), **data):
            refused = denied(snap.capabilities, call) if checked else None
            if refused is not None:
                log.warning("hook %s of %s not run: %s", call.node, owner, refused.message)
                continue
            try:
                context = ToolContext(snap.run_id, snap.graph_id, call.node, snap.step)
                outcome = await self.call(snap, call, context)
            except Exception as exc:  # a hook must never break the run
                log.warning("hook %s of %s raised: %s", call.node, owner, exc)
                continue
            if outcome.failure is not None:
                log.warning("hook %s of %s failed: %s", call.node, owner, outcome.failure.message)
                continue
            answers.append(outcome.result)
        return answers
