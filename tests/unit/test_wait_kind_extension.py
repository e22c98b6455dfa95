"""A new kind of wait is one module: its `Wait` model and its `WaitKind`, and no edit elsewhere.

The kind below is defined in this test alone (registered while it runs, then taken out): it
makes a gate node wait two rounds before it goes on. The real executor, over a `MemoryStore`,
suspends and resumes the step through the protocol without knowing the kind's name.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar, Literal

import pytest
from memory_cluster import MemoryCluster, submit

from graphrunner.cluster.steps.decisions import Complete, Decision, Suspend
from graphrunner.cluster.waits import base
from graphrunner.engine import NoOutcome, Wait

GATED = """
id: unit/gated
state: {seen: {type: list, default: [], reducer: append}}
config: {start: hold}
nodes:
  hold: {type: gate, assign: {seen: [held]}, next: done}
  done: {type: return, output: {seen: "${state.seen}"}}
"""


@pytest.fixture
def patience() -> Iterator[type[Wait]]:
    """Register a kind that holds a gate step for two rounds; take it out afterwards."""

    class PatienceWait(Wait):
        waiting_for: ClassVar[str] = "two rounds of patience"
        kind: Literal["patience"] = "patience"
        rounds: int = 0

    class Patience(base.WaitKind[PatienceWait]):
        plans = frozenset({"gate"})
        waits = (PatienceWait,)

        async def start(self, ctx: Any, step: Any, hook_round: int, prior: str) -> Decision | None:
            return Suspend(PatienceWait(hook_round=hook_round))

        async def join(self, ctx: Any, step: Any, wait: PatienceWait, woken_by: str) -> Decision:
            if wait.rounds < 2:
                return Suspend(wait.but(rounds=wait.rounds + 1))
            return Complete(NoOutcome(), wait.hook_round)

    try:
        yield PatienceWait
    finally:
        kind = base.BY_MODEL.pop(PatienceWait)
        base.BY_PLAN["gate"].remove(kind)
        Wait.KINDS.pop("patience")


def test_a_kind_defined_in_one_module_suspends_and_resumes_a_step(patience: type[Wait]) -> None:
    mc = MemoryCluster()
    try:
        run_id = submit(mc, GATED)
        assert [mc.step().outcome for _ in range(2)] == ["suspended", "suspended"]
        waiting = mc.snap(run_id)
        assert isinstance(waiting.wait, patience) and waiting.wait.model_dump()["rounds"] == 1
        assert waiting.wait.describe() == "two rounds of patience"
        assert [h.outcome for h in mc.drive()] == ["suspended", "committed", "committed"]
        done = mc.snap(run_id)
        assert done.status.value == "completed" and done.output == {"seen": ["held"]}
        assert done.wait is None
    finally:
        mc.close()
