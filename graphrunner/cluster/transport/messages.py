"""The task messages: what a step or item task receives (checked before anything is done with
it), and `Outgoing`, a message the cluster is about to send."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from graphrunner.cluster.runs.ids import RUN_ID_TEXT
from graphrunner.errors import BadMessage

STEP_TASK = "graphrunner.step"
ITEM_TASK = "graphrunner.item"
TASKS = (STEP_TASK, ITEM_TASK)


class StepMessage(BaseModel):
    """Take (or go on with) the step after `step` steps of run `run_id`, suspended `phase`
    times so far: the fence the commit checks."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str = Field(pattern=rf"^{RUN_ID_TEXT}\z")
    step: int = Field(ge=0)
    phase: int = Field(default=0, ge=0)
    child: str = Field(default="", pattern=rf"^(|{RUN_ID_TEXT})\z")  # the child run that woke it

    @classmethod
    def parse(cls, args: Any, kwargs: Any) -> StepMessage:
        """The message from a task's raw arguments; raises `BadMessage` naming what is wrong."""
        try:
            if kwargs or not isinstance(args, list | tuple) or len(args) not in (2, 3, 4):
                got = f"args={args!r:.200} kwargs={kwargs!r:.200}"
                raise ValueError(f"expected (run_id, step[, phase[, child]]), got {got}")
            fields = dict(zip(("run_id", "step", "phase", "child"), args, strict=False))
            return cls.model_validate(fields, strict=True)
        except (ValueError, ValidationError) as exc:
            raise BadMessage(f"malformed step message: {_first_line(exc)}") from None


TRACEPARENT = r"^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]\z"


class BatchedItem(BaseModel):
    """One more item of a batched item message: its index and its call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int = Field(ge=0)
    call: dict[str, Any]


class ItemMessage(BaseModel):
    """Run one item of a parallel foreach (with `batch`, several, one after another) and record its
    result under `tag` and `index`.

    `phase` and `upto`: the step waits at `phase` for `upto` item records under `tag`; the save
    that records the `upto`-th sends the step's join (at `phase`). 0: the message of a chord,
    whose body is the join.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str = Field(pattern=rf"^{RUN_ID_TEXT}\z")
    graph_id: str
    graph_hash: str
    step: int = Field(ge=1)
    tag: str
    index: int = Field(ge=0)
    call: dict[str, Any]
    batch: tuple[BatchedItem, ...] = ()  # the items after `index` this message runs too
    phase: int = Field(default=0, ge=0)
    upto: int = Field(default=0, ge=0)
    attempt: int = Field(default=1, ge=1)
    timer: dict[str, Any] | None = None  # {"result": ...}: a durable sleep that has come due
    trace: str | None = Field(default=None, pattern=TRACEPARENT)  # the span its span hangs under
    correlation: str | None = Field(default=None, max_length=256)  # its trace's correlation id
    sig: str = Field(default="", max_length=128)  # HMAC of the rest under the cluster's key (signing.py)

    def each(self) -> list[ItemMessage]:
        """The message of each item this one runs, in item order (itself, when it is not a batch)."""
        if not self.batch:
            return [self]
        first = self.model_copy(update={"batch": ()})
        return [first, *(first.model_copy(update={"index": b.index, "call": b.call}) for b in self.batch)]

    @classmethod
    def parse(cls, args: Any, kwargs: Any) -> ItemMessage:
        """The message from a task's raw arguments (one mapping); raises `BadMessage`."""
        mapping = cls.shape(args, kwargs)
        try:
            return cls.model_validate(mapping)
        except ValidationError as exc:
            raise BadMessage(f"malformed foreach item message: {_first_line(exc)}") from None

    @staticmethod
    def shape(args: Any, kwargs: Any) -> dict[str, Any]:
        """The one mapping a task's raw arguments must be (not yet validated); raises `BadMessage`."""
        if kwargs or not isinstance(args, list | tuple) or len(args) != 1 or not isinstance(args[0], dict):
            got = f"args={args!r:.200} kwargs={kwargs!r:.200}"
            raise BadMessage(f"malformed foreach item message: expected one mapping, got {got}")
        return args[0]


class Outgoing(BaseModel):
    """A task message to send: task, arguments, queue and the name Flower shows (`shadow`).

    `due` (epoch s) makes it a durable timer. `tracked`: it carries its run forward (the
    run's next step), so the run records it as sent. `gather`: a parent step's wake-up (parent
    run id, step, the child that ended, how long its flag holds), sent only when none is pending
    (`store.Gather`).
    """

    model_config = ConfigDict(frozen=True)

    task: str
    args: tuple[Any, ...]
    queue: str
    shadow: str
    due: float | None = None
    tracked: bool = False
    gather: tuple[str, int, str, int] | None = None


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return " ".join(text.splitlines()[:3])[:500]
