"""`TraceLink`: where a run's spans hang in its OpenTelemetry trace, kept with the run.

A run's steps are taken by many tasks on many workers, hours apart; no span can stay open
between them. So the run keeps what every task needs to put its spans into one trace: the
trace id, the span its run span hangs under (the producer's span, or the parent run's
suspension span for a child run), whether the trace is sampled, and the run span's segment
(a resumed run opens a new run span in the same trace). Plain data: the engine never looks
inside it, and the package's telemetry code derives every span id from it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

HEX_TRACE = r"^[0-9a-f]{32}$"
HEX_SPAN = r"^[0-9a-f]{16}$"


class TraceLink(BaseModel):
    """A run's place in its trace: `trace_id`, the `parent` span id of its run span, `sampled`
    (None: the workers' sampler decides), the run span's `segment` and when it began (`since`,
    epoch ms), and the `namespace` of the nodes that started it (a child run's parent nodes).
    Serialized by pydantic alone (no serializer of ours: it is written with every commit)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    trace_id: str = Field(pattern=HEX_TRACE)
    parent: str | None = Field(default=None, pattern=HEX_SPAN)
    sampled: bool | None = None
    segment: int = 0
    since: int = 0
    namespace: tuple[str, ...] = ()
    state: str | None = None  # the W3C tracestate that came with the parent, passed on as is
    correlation: str | None = None  # the run id of the run the trace began with (OA correlation id)
    branch: str | None = None  # a parallel node's child run: its branch
    index: int | None = None  # a foreach's child run: its item
