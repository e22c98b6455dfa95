"""A foreach item as a run keeps it: its call on the wire, and its stored record.

The call an item message carries (`call_payload`, read back by `call_from`) is the form the
worker that derives it signs (`transport/signing.py`). An item's outcome is stored as an
`ItemRecord` under its index until the foreach collects it, by the item task or by a step that
runs items one at a time (`Cluster.save_items`); the join folds the records, read a page at a
time in item order, into the foreach's outcome and its items' times (`fold_records`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Sequence
from dataclasses import fields
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, PlainValidator, model_serializer

from graphrunner.engine import ActionCall, ActionFailure, ActionOutcome, ItemOutcome, ItemsFold
from graphrunner.model import RetryPolicy
from graphrunner.services.timings import ItemTimes, TimesFold


def call_payload(call: ActionCall) -> dict[str, Any]:
    """An `ActionCall` as JSON for an item message (the signed wire form: `call_from` reads it).

    Shallow: the call's values are the item's own (its params rendered for it), and its retry
    policies, the node's, are dumped once per node, not once per item."""
    data = {f.name: getattr(call, f.name) for f in fields(call)}
    data["retry"] = _policies(call.retry)
    if call.non_finite == "fail":  # the default: not on the wire, as before the setting
        del data["non_finite"]
    return data


@functools.lru_cache(maxsize=256)
def _policies(retry: tuple[RetryPolicy, ...]) -> list[dict[str, Any]]:
    """Retry policies as item messages carry them (read only: shared by the items of a node)."""
    return [p.model_dump(mode="json") for p in retry]


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


def fold_records(
    records: Iterable[dict[str, Any] | None], items: Sequence[Any]
) -> tuple[ItemsFold, ItemTimes]:
    """A foreach's outcome and its items' times from the stored records of its items, in item order
    (as the store's `item_records` reads them, a page at a time), in one pass: no record nor outcome
    outlives its turn, but the results and the failures the outcome keeps."""
    fold, times = ItemsFold(), TimesFold()
    for index, record in enumerate(records):
        fold.add(index, items[index], _read(index, record))
        if record is None:
            times.add(index, ok=False)
        else:
            at, ms, worker = record.get("at", 0), record.get("ms"), record.get("worker", "")
            times.add(index, at, ms, bool(record.get("ok")), worker)
    return fold, times.summary()


def outcome_of(index: int, item: Any, record: ItemRecord | dict[str, Any] | None) -> ItemOutcome:
    """An item's outcome from its record (read, or as the store's `item_records` yields it)."""
    read = record.model_dump() if isinstance(record, ItemRecord) else record
    return ItemOutcome(index, item, _read(index, read))


def _read(index: int, record: dict[str, Any] | None) -> ActionOutcome:
    """Item `index`'s outcome from its stored record, read without building its `ItemRecord` (a
    missing record is a failure; a failed one without its error fails as `permanent`)."""
    if record is None:
        failure = ActionFailure("permanent", f"item {index}: its result is missing", "MissingItemResult")
        return ActionOutcome(failure=failure)
    attempts = int(record.get("attempts", 1))
    if record.get("ok"):
        return ActionOutcome(record.get("result"), attempts=attempts, cache_hit=bool(record.get("cache_hit")))
    return ActionOutcome(failure=_failure(record.get("error")), attempts=attempts)
