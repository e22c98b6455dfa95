"""Which hooks fire for an event, with what params, and what their answers mean (pure)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from graphrunner import namespaces as ns
from graphrunner.engine.calls import ActionCall
from graphrunner.engine.outcomes import Control
from graphrunner.engine.snapshot import RunSnapshot
from graphrunner.errors import ExpressionError

if TYPE_CHECKING:
    from graphrunner.compiled import CompiledHook

CONTROLS: tuple[Control, ...] = ("retry", "continue", "fail")


def hook_calls(
    hooks: Iterable[CompiledHook], event: str, snap: RunSnapshot, now: datetime, **data: Any
) -> list[ActionCall]:
    """The dispatches of `hooks` for `event`, in order; a hook whose `when` fails to evaluate is skipped.

    The event's data is `event.<key>`; a Rye graph's hooks (`rye`) also read it as `<key>`.
    """
    flat = {k: v for k, v in data.items() if k in ns.RYE_HOOK_DATA}
    ctx = ns.context(
        state=snap.state,
        inputs=snap.inputs,
        run=snap.run_namespace(),
        now=now,
        event={"name": event, **data},
        **flat,
    )
    calls = []
    for hook in hooks:
        if hook.spec.event != event:
            continue
        try:
            if hook.when is not None and not hook.when.holds(ctx):
                continue
            params = hook.params.render(ctx)
        except ExpressionError:
            continue
        clean = {k: v for k, v in params.items() if v is not None} if isinstance(params, dict) else {}
        calls.append(ActionCall(node=f"hook:{event}", tool=hook.spec.action.tool, params=clean, retry=()))
    return calls


def control_answer(result: Any) -> Control | None:
    """A hook's answer: `"retry"`/`"continue"`/`"fail"`, or a mapping with `control:` one of them."""
    value = result.get("control") if isinstance(result, dict) else result
    return value if value in CONTROLS else None


def first_answer(results: Iterable[Any]) -> Control | None:
    """The first non-null control answer of graph hooks, which decides control flow."""
    for result in results:
        answer = control_answer(result)
        if answer is not None:
            return answer
    return None
