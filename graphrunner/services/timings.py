"""How long a step's parts took, as its transcript record keeps them: its foreach items.

A foreach step's record carries `items`: how many items ran, how many failed, the p50, p95
and longest item duration, and per item (the first `MAX_ITEM_TIMES` by index) when it
started, how long it took, whether it succeeded and on which worker. The item records
themselves are dropped once the step is committed; this summary is what the run explorer's
timeline shows of them.
"""

from __future__ import annotations

from collections.abc import Sequence

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
    def of(cls, times: Sequence[ItemTime]) -> ItemTimes:
        """The summary of every item's `times`, in index order."""
        durations = sorted(t.ms for t in times if t.ms is not None)
        return cls(
            count=len(times),
            failed=sum(1 for t in times if not t.ok),
            p50_ms=percentile(durations, 0.50),
            p95_ms=percentile(durations, 0.95),
            max_ms=durations[-1] if durations else None,
            items=tuple(times[:MAX_ITEM_TIMES]),
        )


def percentile(ordered: Sequence[float], fraction: float) -> float | None:
    """The `fraction` percentile of the sorted `ordered` (nearest rank), None when empty."""
    if not ordered:
        return None
    rank = max(1, -(-len(ordered) * fraction // 1))  # ceil(n * fraction), at least the first
    return ordered[int(rank) - 1]
