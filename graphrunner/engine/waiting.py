"""What a suspended step waits for, as the run record keeps it between tasks: the base model.

A step that cannot finish in one task (a retry backoff, a durable sleep, foreach items, child
runs, an error hook's retry) is suspended: the run keeps a `Wait` and its `phase` is bumped.
Each kind of wait is a subclass with a `kind` literal of its own, defined beside the code that
runs it (`graphrunner.cluster.waits`); defining the subclass registers it, so a stored wait is
read back as the model it was written as. The engine itself never looks inside a wait.

The stored form is `kind` and the fields that differ from their defaults (an empty field is
not stored), so a field added later reads back from an older record as its default.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from graphrunner.errors import GraphrunnerError


class UnknownWait(GraphrunnerError):
    """A stored wait of a kind no module of this process defines."""


class Wait(BaseModel):
    """A suspended step: what kind of wait, the error hooks' round, and when it comes due."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    KINDS: ClassVar[dict[str, type[Wait]]] = {}
    waiting_for: ClassVar[str] = ""  # what a run suspended on it waits for, in words

    kind: str
    hook_round: int = 0
    due: float | None = None  # epoch seconds; None: it waits for something else to happen
    since: float | None = None  # epoch seconds: when the step was suspended on it
    begun: float | None = None  # epoch seconds: when the first task of the step began

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        kind = cls.model_fields["kind"].default
        if isinstance(kind, str):
            Wait.KINDS[kind] = cls

    @classmethod
    def parse(cls, data: Wait | dict[str, Any]) -> Wait:
        """The wait `data` stored, as the model of its kind; raises `UnknownWait`."""
        if isinstance(data, Wait):
            return data
        kind = data.get("kind")
        if not isinstance(kind, str):
            raise UnknownWait(f"a suspended step's wait names no kind: {data!r:.200}")
        return Wait.KINDS.get(kind, UnregisteredWait).model_validate(data)

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        fields = type(self).model_fields
        return {
            name: value
            for name, value in handler(self).items()
            if name == "kind"
            or name not in fields
            or getattr(self, name) != fields[name].get_default(call_default_factory=True)
        }

    def describe(self) -> str:
        """What a run suspended on this wait waits for, in words (for a wait that timed out)."""
        return self.waiting_for or f"a wait of kind {self.kind!r}"

    def deadline(self, now: float, stall_after: float) -> float:
        """When the sweeper should look at a run suspended on this wait if nothing happens (epoch
        s): `stall_after` after now, or after `due`."""
        return (now if self.due is None else max(now, self.due)) + stall_after

    def remaining(self, now: float | None = None) -> float:
        """Seconds until `due` (0 when due, or when it has no due time)."""
        if self.due is None:
            return 0.0
        return max(0.0, self.due - (time.time() if now is None else now))

    def but(self, **changes: Any) -> Self:
        """A copy with `changes` (of the same kind; not validated: pass the fields' own types)."""
        return self.model_copy(update=changes)


class UnregisteredWait(Wait):
    """A stored wait of a kind no module of this process defines (a reader that never imported
    the cluster's kinds, or a newer version's kind): kept as stored, so it shows and round-trips;
    a worker that must act on it refuses it (`UnknownWait`)."""

    model_config = ConfigDict(frozen=True, extra="allow")
