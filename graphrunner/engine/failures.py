"""Why a run, a step or a child run failed, and the errors a run tolerated: typed, not dicts.

`RunFailure` is what a failed run keeps (`RunSnapshot.error`), what a failed step's transcript
record and event carry, and how a child run's failure reaches its parent. Its JSON form leaves
out what is unset, so a record or an API answer carries only the keys that say something.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer


class _Compact(BaseModel):
    """A frozen model whose JSON form drops unset (None) fields."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    @model_serializer(mode="wrap")
    def _without_nones(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None}


class RunFailure(_Compact):
    """An error: its category (`type`), what happened, and where.

    - `type`: the error category (DESIGN §2.5): `node_exception`, `limit_exceeded`,
      `permission_denied`, `cancelled`, `env_missing`, an action's classification ...
    - `error_type`: the exception or error class behind it, when there is one.
    - `node`, `step`: where it happened (a run's error; unset for a child's end).
    - `field`, `reducer`: a reducer that refused an update.
    - `index`: the foreach item it happened to (a tolerated item error, a failed foreach child).
    - `branch`: the parallel branch that failed (`branch_failed`).
    - `traceback`: the traceback of the exception behind it, when it is worth keeping.
    """

    type: str
    message: str = ""
    node: str | None = None
    step: int | None = None
    error_type: str | None = None
    field: str | None = None
    reducer: str | None = None
    index: int | None = None
    branch: str | None = None
    traceback: str | None = None

    def to_dict(self, *, traceback: bool = True) -> dict[str, Any]:
        """The JSON form (`traceback=False`: without the traceback, for what goes into state)."""
        data = self.model_dump(mode="json")
        if not traceback:
            data.pop("traceback", None)
        return data

    def at(self, node: str | None, step: int | None) -> RunFailure:
        """This failure, placed at `node` and `step`."""
        return self.model_copy(update={"node": node, "step": step})


class ToleratedError(_Compact):
    """An error a run went on past (error_mode `continue`): the step and node, and the error."""

    step: int
    node: str
    error: RunFailure


class ParentLink(_Compact):
    """The step of the parent run that started a child run (and that its end wakes)."""

    run_id: str
    step: int
    phase: int = 0
    graph_id: str = ""
    node: str | None = None


class ForkLink(_Compact):
    """The run and step a forked run was started from (`graphrunner fork`, `Client.fork`)."""

    run_id: str
    step: int
