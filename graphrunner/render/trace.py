"""`RunTrace`: what a run did, reduced to what a drawing of its graph paints.

A run's path and transcript can be long (a loop of thousands of steps); a trace keeps only
per-node visit counts, the failed nodes, the node the run is at and the transitions it
took, so it is as small as the graph whatever the run's length.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from graphrunner.model import END
from graphrunner.services.records import AnyRecord, StepRecord, parse

if TYPE_CHECKING:
    from graphrunner.engine import RunFailure, RunSnapshot, ToleratedError
    from graphrunner.results import RunResult

MAX_RECORDS = 100_000  # transcript records folded into a trace; the path covers the rest
AT_NODE = ("pending", "running", "paused")  # a run with one of these statuses is at its `node`
ENDED = ("completed", "completed_with_errors")
Transition = tuple[str, str, str | None]  # (node, next node, "ok" | "error" | None when unknown)


@dataclass(frozen=True)
class RunTrace:
    """A run as drawn on its graph: visits per node, failed nodes, its current node, transitions."""

    run_id: str
    status: str
    visits: Mapping[str, int]
    failed: frozenset[str]
    current: str | None = None
    transitions: frozenset[Transition] = frozenset()
    records_read: int = 0
    complete: bool = True  # every transcript record was read

    @classmethod
    def build(
        cls,
        *,
        run_id: str,
        status: str,
        node: str | None,
        path: Sequence[str],
        records: Iterable[Mapping[str, Any] | AnyRecord] = (),
        error: RunFailure | None = None,
        errors: Iterable[ToleratedError] = (),
        max_records: int = MAX_RECORDS,
    ) -> RunTrace:
        """A trace from a run's status, node, path, transcript records and errors.

        At most `max_records` records are read; transitions not in the records read are
        taken from the path, whose kind (next or on_error) is then unknown.
        """
        fold = _Fold(max_records)
        fold.read(records)
        failed = set(fold.failed)
        failed.update(e.node for e in (error, *errors) if e is not None and e.node)
        return cls(
            run_id=run_id,
            status=status,
            visits=dict(Counter(path)),
            failed=frozenset(failed),
            current=node if status in AT_NODE else None,
            transitions=frozenset(fold.known | _from_path(path, status, fold.known)),
            records_read=fold.count,
            complete=not fold.truncated,
        )

    @classmethod
    def of_snapshot(
        cls,
        snapshot: RunSnapshot,
        records: Iterable[Mapping[str, Any] | AnyRecord] = (),
        max_records: int = MAX_RECORDS,
    ) -> RunTrace:
        """The trace of a run read from a store: its snapshot (with path) and transcript."""
        return cls.build(
            run_id=snapshot.run_id,
            status=snapshot.status.value,
            node=snapshot.node,
            path=snapshot.path,
            records=records,
            error=snapshot.error,
            errors=snapshot.errors,
            max_records=max_records,
        )

    @classmethod
    def of_result(cls, result: RunResult) -> RunTrace:
        """The trace of a `RunResult` (from `graph.invoke`, `run.wait()` or `run.result()`)."""
        node = result.snapshot.node if result.snapshot is not None else None
        return cls.build(
            run_id=result.run_id,
            status=result.status,
            node=node,
            path=result.path,
            records=result.steps,
            error=result.error,
            errors=result.errors,
        )

    def taken(self, source: str, target: str, kind: str | None) -> bool:
        """True if the run went from `source` to `target` by an edge of `kind` (None: any kind)."""
        if kind is None:
            return any(t[0] == source and t[1] == target for t in self.transitions)
        return (source, target, kind) in self.transitions or (source, target, None) in self.transitions


class _Fold:
    """Transcript records folded into transitions and failed nodes, up to a limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0
        self.truncated = False
        self.known: set[Transition] = set()
        self.failed: set[str] = set()

    def read(self, records: Iterable[Mapping[str, Any] | AnyRecord]) -> None:
        for record in records:
            if self.count >= self.limit:
                self.truncated = True
                return
            self.count += 1
            self._one(parse(record))

    def _one(self, record: AnyRecord) -> None:
        if not record.node:
            return
        node, status = record.node, record.status
        if status == "error":
            self.failed.add(node)
        target = record.next_node if isinstance(record, StepRecord) else None
        if status == "end":
            self.known.add((node, END, "ok"))
        elif target is not None:
            self.known.add((node, target, "error" if status == "error" else "ok"))


def _from_path(path: Sequence[str], status: str, known: set[Transition]) -> set[Transition]:
    """Consecutive path nodes the records did not explain, as transitions of unknown kind."""
    pairs = set(pairwise(path))
    if path and status in ENDED:
        pairs.add((path[-1], END))
    explained = {(a, b) for a, b, _ in known}
    return {(a, b, None) for a, b in pairs - explained}
