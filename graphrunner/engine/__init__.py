"""The pure step engine (DESIGN §8): snapshots in, snapshots out, no I/O.

A step is `prepare` (what to dispatch) then, after the runner did the I/O, `complete`
(update, merged state, next node, errors, transcript event).
"""

from graphrunner.engine.calls import ActionCall
from graphrunner.engine.failures import ParentLink, RunFailure, ToleratedError
from graphrunner.engine.hooks import control_answer, first_answer, hook_calls
from graphrunner.engine.outcomes import (
    ActionFailure,
    ActionOutcome,
    BranchOutcome,
    ChildOutcome,
    Control,
    ForeachOutcome,
    ItemOutcome,
    ItemsFold,
    NoOutcome,
    Outcome,
    ParallelOutcome,
    Retried,
)
from graphrunner.engine.plan import BranchStart, StepPlan, item_call, item_child, prepare
from graphrunner.engine.snapshot import RunSnapshot, RunStatus, StepEvent
from graphrunner.engine.start import begin, missing_env, resume, too_deep
from graphrunner.engine.step import complete
from graphrunner.engine.stepping import StepResult
from graphrunner.engine.trace_link import TraceLink
from graphrunner.engine.waiting import UnknownWait, Wait

__all__ = [
    "ActionCall",
    "ActionFailure",
    "ActionOutcome",
    "BranchOutcome",
    "BranchStart",
    "ChildOutcome",
    "Control",
    "ForeachOutcome",
    "ItemOutcome",
    "ItemsFold",
    "NoOutcome",
    "Outcome",
    "ParallelOutcome",
    "ParentLink",
    "Retried",
    "RunFailure",
    "RunSnapshot",
    "RunStatus",
    "StepEvent",
    "StepPlan",
    "StepResult",
    "ToleratedError",
    "TraceLink",
    "UnknownWait",
    "Wait",
    "begin",
    "complete",
    "control_answer",
    "first_answer",
    "hook_calls",
    "item_call",
    "item_child",
    "missing_env",
    "prepare",
    "resume",
    "too_deep",
]
