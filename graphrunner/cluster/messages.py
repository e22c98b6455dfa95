"""The step message: what a step task carries, checked before anything is done with it."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from graphrunner.errors import GraphrunnerError

RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
TASK_NAME = "graphrunner.step"
ITEM_TASK_NAME = "graphrunner.item"
SWEEP_TASK_NAME = "graphrunner.sweep"


class BadMessage(GraphrunnerError):
    """A message on the queue that is not a valid step message."""


class InvalidRunId(GraphrunnerError):
    """A run id that does not match `RUN_ID`."""


def check_run_id(run_id: Any) -> str:
    """`run_id` if it is well formed; raises `InvalidRunId` naming the rule otherwise."""
    if not isinstance(run_id, str) or not RUN_ID.match(run_id):
        raise InvalidRunId(
            f"invalid run id {run_id!r}: use 1-128 letters, digits, '_', '.', ':' or '-', "
            "starting with a letter or digit"
        )
    return run_id


CONCURRENCY_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,199}$")


def check_concurrency_key(key: Any) -> str | None:
    """`key` (or None) if it is well formed; raises `InvalidRunId` naming the rule otherwise."""
    if key is None:
        return None
    if not isinstance(key, str) or not CONCURRENCY_KEY.match(key):
        raise InvalidRunId(
            f"invalid concurrency key {key!r}: use 1-200 letters, digits, '_', '.', ':', '/' or '-', "
            "starting with a letter or digit"
        )
    return key


class StepMessage(BaseModel):
    """Take (or go on with) the step after `step` steps of run `run_id`, suspended `phase`
    times so far: the fence the commit checks."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str = Field(pattern=RUN_ID.pattern)
    step: int = Field(ge=0)
    phase: int = Field(default=0, ge=0)

    @classmethod
    def parse(cls, args: tuple[Any, ...], kwargs: dict[str, Any]) -> StepMessage:
        """The message from a task's raw arguments; raises `BadMessage`."""
        try:
            if kwargs or len(args) not in (2, 3):
                raise ValueError(f"expected (run_id, step[, phase]), got args={args!r} kwargs={kwargs!r}")
            return cls.model_validate(dict(zip(("run_id", "step", "phase"), args, strict=False)), strict=True)
        except (ValueError, ValidationError) as exc:
            raise BadMessage(f"dropped a malformed step message: {exc}") from None


class ItemMessage(BaseModel):
    """Run one item of a parallel foreach and record its result under `tag` and `index`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str = Field(pattern=RUN_ID.pattern)
    graph_id: str
    graph_hash: str
    step: int = Field(ge=1)
    tag: str
    index: int = Field(ge=0)
    call: dict[str, Any]
    attempt: int = Field(default=1, ge=1)
    timer: dict[str, Any] | None = None  # {"result": ...}: a durable sleep that has come due

    @classmethod
    def parse(cls, args: tuple[Any, ...], kwargs: dict[str, Any]) -> ItemMessage:
        """The message from a task's raw arguments (one mapping); raises `BadMessage`."""
        try:
            if kwargs or len(args) != 1 or not isinstance(args[0], dict):
                raise ValueError(f"expected one mapping, got args={args!r:.200} kwargs={kwargs!r:.200}")
            return cls.model_validate(args[0])
        except (ValueError, ValidationError) as exc:
            raise BadMessage(f"dropped a malformed foreach item message: {exc}") from None
