"""A run's history: the state after each of its steps, rebuilt from what is already stored.

Nothing is written per step for it beyond the transcript: a run keeps its initial state where
it starts (`create_run`), every step record carries the values it changed (`changed_values`,
up to `MAX_CARRIED_BYTES`), and a commit keeps the values its records leave out (too large, a
resume's patch) as a side record in the same write (`asides`), while the run's history is
within its budget (`GRAPHRUNNER_HISTORY_MAX_BYTES`). Folding the transcript in order over the
initial state gives the state after every step (`fold`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from graphrunner.errors import HistoryUnavailable, RunNotFound
from graphrunner.services.records import AnyRecord, ResumeRecord, StepRecord, UnknownRecord, parse
from graphrunner.store import Aside, Kept, StepEntry, Store

if TYPE_CHECKING:
    from graphrunner.engine import RunSnapshot

START = "start"  # the status of a history's first entry: where the run (or a fork) starts


class HistoryEntry(BaseModel):
    """The run after one step: the step's number, the node it ran and its status (`ok`, `error`,
    `end`, `paused`; `start` for where the run starts, before any step), where the run went
    next (`next_node`; for `start`, the first node), the state after it and the graph version
    it ran on."""

    model_config = ConfigDict(frozen=True)

    step: int
    node: str | None
    status: str
    next_node: str | None
    state: dict[str, Any]
    graph_hash: str = ""


@dataclass(frozen=True)
class History:
    """A run's history as far as it is kept, and why it stops where it does (`cut`, None when
    it reaches the run's last step)."""

    run_id: str
    entries: tuple[HistoryEntry, ...]
    cut: str | None = None
    origin: tuple[str, int] | None = None  # a fork's: the run and step it was forked from

    def at(self, step: int) -> HistoryEntry:
        """The entry of step `step` (the last, when a step was taken twice); raises
        `HistoryUnavailable` naming the run, the step and why."""
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            raise HistoryUnavailable(f"run {self.run_id}: a step is a whole number from 0, got {step!r}")
        found = [e for e in self.entries if e.step == step]
        if found:
            return found[-1]
        raise HistoryUnavailable(f"run {self.run_id}: no state kept after step {step}: {self._why(step)}")

    def _why(self, step: int) -> str:
        first = self.entries[0].step if self.entries else None
        if first is not None and step < first:
            if self.origin is not None:
                origin, at = self.origin
                return f"it was forked from run {origin} at step {at}; read run {origin} for steps up to {at}"
            return f"its history starts at step {first}"
        last = self.entries[-1].step if self.entries else None
        if self.cut is not None:
            return self.cut
        return f"it has taken steps {first} to {last}" if last is not None else "it has no history"


def asides(records: Sequence[AnyRecord], state: Mapping[str, Any]) -> list[Aside]:
    """The side records a commit of `records` keeps, leaving the run with `state`: for a step
    record, the values it leaves out; for a resume, its patch. None in the common case."""
    kept: list[Aside] = []
    for index, record in enumerate(records):
        if isinstance(record, StepRecord) and record.values_omitted:
            keys: Sequence[str] = record.values_omitted
        elif isinstance(record, ResumeRecord) and record.changed_keys:
            keys = record.changed_keys
        else:
            continue
        values = {k: state[k] for k in keys if k in state}
        kept.append(Aside(index, record.step, json.dumps(values, default=str)))
    return kept


def read(store: Store, run_id: str, snap: RunSnapshot | None = None) -> History:
    """The history of run `run_id` (whose snapshot is `snap`, when the caller has read it);
    raises `RunNotFound` (also for a run whose retention passed)."""
    found = store.history(run_id)
    if found is None:
        raise RunNotFound(f"no run with id {run_id!r} (a finished run is kept GRAPHRUNNER_RETENTION seconds)")
    kept, entries = found
    snap = snap if snap is not None else store.load_run(run_id)
    origin = (snap.forked_from.run_id, snap.forked_from.step) if snap and snap.forked_from else None
    return fold(run_id, kept, entries, origin)


def fold(
    run_id: str, kept: Kept, entries: Sequence[StepEntry], origin: tuple[str, int] | None = None
) -> History:
    """The state after each step: the transcript's changes folded over the initial state, in order."""
    if kept.start is None or kept.state is None:
        why = "it keeps no history (started with GRAPHRUNNER_HISTORY_MAX_BYTES=0, or before history was kept)"
        if kept.full_at is not None:
            why = "its initial state alone is over the history budget (GRAPHRUNNER_HISTORY_MAX_BYTES)"
        return History(run_id, (), why, origin)
    state = dict(kept.state)
    graph_hash = str(kept.start.get("graph_hash", ""))
    first = HistoryEntry(
        step=int(kept.start["step"]),
        node=None,
        status=START,
        next_node=kept.start.get("node"),
        state=dict(state),
        graph_hash=graph_hash,
    )
    out = [first]
    for entry in entries:
        record = parse(entry.record)
        if isinstance(record, ResumeRecord):
            graph_hash = record.graph_hash or graph_hash
        if isinstance(record, UnknownRecord) or not isinstance(record, StepRecord | ResumeRecord):
            continue
        missing = _apply(state, record, kept.asides.get(entry.id))
        if missing:
            return History(run_id, tuple(out), _cut(kept, record.step), origin)
        if isinstance(record, StepRecord):
            out.append(_entry(record, state, graph_hash))
    return History(run_id, tuple(out), None, origin)


def _apply(state: dict[str, Any], record: StepRecord | ResumeRecord, aside: dict[str, Any] | None) -> bool:
    """Fold one record's changes into `state`; True when a side record it needs is not kept."""
    if isinstance(record, ResumeRecord):
        if not record.changed_keys:
            return False
        if aside is None:
            return True
        state.update(aside)
        return False
    if record.values_omitted and aside is None:
        return True
    for key in record.changed_keys:
        if key in record.changed_values:
            state[key] = record.changed_values[key]
        elif aside is not None and key in aside:
            state[key] = aside[key]
        else:
            state.pop(key, None)  # left out because it is no longer in the state
    return False


def _entry(record: StepRecord, state: dict[str, Any], graph_hash: str) -> HistoryEntry:
    return HistoryEntry(
        step=record.step,
        node=record.node,
        status=record.status,
        next_node=record.next_node,
        state=dict(state),
        graph_hash=graph_hash,
    )


def _cut(kept: Kept, step: int) -> str:
    if kept.full_at is not None:
        return (
            f"its history reached its budget (GRAPHRUNNER_HISTORY_MAX_BYTES) at step {kept.full_at}: "
            f"the states from step {step} on are not kept"
        )
    return f"the values step {step} changed are not kept"
