"""A foreach item as a run keeps it: its call on the wire, and its stored record.

The call an item message carries (`call_payload`, read back by `call_from`) is the form the
worker that derives it signs (`transport/signing.py`). An item's outcome is stored as an
`ItemRecord` under its index until the foreach collects it (`Cluster.save_item`, the store's
`load_items`), by the item task or by a step that runs items one at a time.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, PlainValidator, model_serializer

from graphrunner.engine import ActionCall, ActionFailure, ActionOutcome, ItemOutcome
from graphrunner.model import RetryPolicy
from graphrunner.services.timings import ItemTime, ItemTimes


def call_payload(call: ActionCall) -> dict[str, Any]:
    """An `ActionCall` as JSON for an item message (the signed wire form: `call_from` reads it)."""
    data = asdict(call)
    data["retry"] = [p.model_dump(mode="json") for p in call.retry]
    return data


def call_from(payload: dict[str, Any]) -> ActionCall:
    """The `ActionCall` of an item message (as `call_payload` wrote it)."""
    retry = tuple(RetryPolicy.model_validate(p) for p in payload.get("retry", ()))
    return ActionCall(**{**payload, "retry": retry})


def _failure(value: Any) -> ActionFailure:
    """An item's stored error (as `ActionFailure.to_dict` wrote it) as the failure."""
    return value if isinstance(value, ActionFailure) else ActionFailure.from_dict(value or {})


class ItemRecord(BaseModel):
    """What is stored for one foreach item: its result or its failure, and the attempts it took.

    Stored as `{ok, attempts, result | error, cache_hit}` (`error` as `ActionFailure.to_dict`
    writes it, `cache_hit` only when true): the form items in flight were recorded in.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    ok: bool = False
    attempts: int = 1
    result: Any = None
    error: Annotated[ActionFailure, PlainValidator(_failure)] | None = None
    cache_hit: bool = False
    at: int = 0  # when it began (epoch ms; 0: not known)
    ms: float | None = None  # how long it ran
    worker: str = ""

    @model_serializer
    def _stored(self) -> dict[str, Any]:
        record: dict[str, Any] = {"ok": self.ok, "attempts": self.attempts}
        if self.error is not None:
            record["error"] = self.error.to_dict()
        else:
            record["result"] = self.result
        if self.cache_hit:
            record["cache_hit"] = True
        if self.ms is not None:
            record.update(at=self.at, ms=self.ms, worker=self.worker)
        return record

    def timed(self, began: float, worker: str) -> ItemRecord:
        """This record of an item that began at `began` (epoch s) and ends now, on `worker`."""
        now = time.time()
        return self.model_copy(
            update={"at": int(began * 1000), "ms": round((now - began) * 1000, 3), "worker": worker}
        )

    def outcome(self) -> ActionOutcome:
        """The item's outcome (a failed record without its error fails as `permanent`)."""
        if self.ok:
            return ActionOutcome(self.result, attempts=self.attempts, cache_hit=self.cache_hit)
        return ActionOutcome(failure=_failure(self.error), attempts=self.attempts)


def record_of(outcome: ActionOutcome) -> ItemRecord:
    """What is stored for one item."""
    result = outcome.result if outcome.ok else None
    return ItemRecord(
        ok=outcome.ok,
        attempts=outcome.attempts,
        result=result,
        error=outcome.failure,
        cache_hit=outcome.cache_hit,
    )


def failed_record(failure: ActionFailure) -> ItemRecord:
    """The record of an item that could not be dispatched (bad params, capability denied, poison)."""
    return record_of(ActionOutcome(failure=failure))


def stored(records: Sequence[dict[str, Any] | None]) -> list[ItemRecord | None]:
    """The items' stored records as the store's `load_items` returns them, each read once."""
    return [None if raw is None else ItemRecord.model_validate(raw) for raw in records]


def item_times(records: Sequence[ItemRecord | None]) -> ItemTimes:
    """The timing of a foreach's items, from their records in item order (a missing one failed)."""
    return ItemTimes.of(
        [
            ItemTime(i=i, ok=False)
            if r is None
            else ItemTime(i=i, at=r.at, ms=r.ms, ok=r.ok, worker=r.worker)
            for i, r in enumerate(records)
        ]
    )


def outcome_of(index: int, item: Any, record: ItemRecord | dict[str, Any] | None) -> ItemOutcome:
    """An item's outcome from its record (read, or as the store's `load_items` returns it)."""
    if record is None:
        failure = ActionFailure("permanent", f"item {index}: its result is missing", "MissingItemResult")
        return ItemOutcome(index, item, ActionOutcome(failure=failure))
    read = record if isinstance(record, ItemRecord) else ItemRecord.model_validate(record)
    return ItemOutcome(index, item, read.outcome())
