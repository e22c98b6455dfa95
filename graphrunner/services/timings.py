"""How long a step's parts took, as its transcript record keeps them: its foreach items.

A foreach step's record carries `items`: how many items ran, how many failed, the p50, p95
and longest item duration, and per item (the first `MAX_ITEM_TIMES` by index) when it
started, how long it took, whether it succeeded and on which worker. The item records
themselves are dropped once the step is committed; this summary is what the run explorer's
timeline shows of them.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict

MAX_ITEM_TIMES = 1000  # items whose own timing a step record keeps (the summary counts them all)


class ItemTime(BaseModel):
    """One foreach item: its index `i`, start `at` (epoch ms, 0 when unknown), duration `ms`
    (None when unknown), whether it succeeded, and its worker."""

    model_config = ConfigDict(frozen=True)

    i: int
    at: int = 0
    ms: float | None = None
    ok: bool = True
    worker: str = ""


class ItemTimes(BaseModel):
    """The items of a foreach step: counts, duration percentiles (ms) and the kept `items`."""

    model_config = ConfigDict(frozen=True)

    count: int
    failed: int = 0
    p50_ms: float | None = None
    p95_ms: float | None = None
    max_ms: float | None = None
    items: tuple[ItemTime, ...] = ()

    @classmethod
    def of(cls, times: Iterable[ItemTime]) -> ItemTimes:
        """The summary of every item's `times`, in index order."""
        fold = TimesFold()
        for t in times:
            fold.add(t.i, t.at, t.ms, t.ok, t.worker)
        return fold.summary()


class TimesFold:
    """Items' times summed up as they come, in index order (a join reading a foreach's records a
    page at a time): counts and every duration, and the first `MAX_ITEM_TIMES` items' own."""

    def __init__(self) -> None:
        self.count = 0
        self.failed = 0
        self.durations = array("d")
        self.kept: list[ItemTime] = []

    def add(self, i: int, at: int = 0, ms: float | None = None, ok: bool = True, worker: str = "") -> None:
        """Count the next item, `i` (the fields of `ItemTime`)."""
        self.count += 1
        self.failed += not ok
        if ms is not None:
            self.durations.append(ms)
        if len(self.kept) < MAX_ITEM_TIMES:
            self.kept.append(ItemTime(i=i, at=at, ms=ms, ok=ok, worker=worker))

    def summary(self) -> ItemTimes:
        """What the step's record keeps of the items counted."""
        durations = sorted(self.durations)
        return ItemTimes(
            count=self.count,
            failed=self.failed,
            p50_ms=percentile(durations, 0.50),
            p95_ms=percentile(durations, 0.95),
            max_ms=durations[-1] if durations else None,
            items=tuple(self.kept),
        )


def percentile(ordered: Sequence[float], fraction: float) -> float | None:
    """The `fraction` percentile of the sorted `ordered` (nearest rank), None when empty."""
    if not ordered:
        return None
    rank = max(1, -(-len(ordered) * fraction // 1))  # ceil(n * fraction), at least the first
    return ordered[int(rank) - 1]
