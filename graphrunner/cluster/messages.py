"""The step message: what a step task carries, checked before anything is done with it."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from graphrunner.errors import GraphrunnerError

RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
TASK_NAME = "graphrunner.step"


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


class StepMessage(BaseModel):
    """Take the step after `step` steps of run `run_id` (the fence the commit checks)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str = Field(pattern=RUN_ID.pattern)
    step: int = Field(ge=0)

    @classmethod
    def parse(cls, args: tuple[Any, ...], kwargs: dict[str, Any]) -> StepMessage:
        """The message from a task's raw arguments; raises `BadMessage`."""
        try:
            if kwargs or len(args) != 2:
                raise ValueError(f"expected (run_id, step), got args={args!r} kwargs={kwargs!r}")
            return cls.model_validate({"run_id": args[0], "step": args[1]}, strict=True)
        except (ValueError, ValidationError) as exc:
            raise BadMessage(f"dropped a malformed step message: {exc}") from None
