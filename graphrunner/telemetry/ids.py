"""The span ids every task of a run derives from its `TraceLink`, and how a span gets them.

No span of a run stays open between its tasks. A span whose children start before it ends in
another process (the run span, a suspended step's wait span that its foreach items and child
runs hang under) is emitted when it ends, by whichever task ends it, with an id that every task
derives alike: a hash of the trace id, the run id and where in the run it is. The SDK's id
generator (`graphrunner.telemetry.sdk`) takes an id forced by `forcing`, when there is one.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from contextvars import ContextVar
from hashlib import blake2b

from graphrunner.engine import TraceLink

_forced: ContextVar[tuple[int, int] | None] = ContextVar("graphrunner_forced_ids", default=None)
_honoured = False  # the tracer provider's id generator takes forced ids (set by `sdk`)


def new_trace_id() -> str:
    """A random W3C trace id (32 hex digits)."""
    return secrets.token_hex(16)


def derived(*parts: object) -> str:
    """A span id (16 hex digits, never all zero) derived from `parts`."""
    digest = blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).hexdigest()
    return digest if digest != "0" * 16 else "0" * 15 + "1"


def run_span(link: TraceLink, run_id: str) -> str:
    """The id of the run span of `run_id` (one per segment: a resume opens a new one)."""
    return derived(link.trace_id, "run", run_id, link.segment)


def wait_span(link: TraceLink, run_id: str, step: int, phase: int) -> str:
    """The id of the span of the wait step `step` (0-based) of `run_id` kept at `phase`."""
    return derived(link.trace_id, "wait", run_id, step, phase)


@contextlib.contextmanager
def forcing(trace_id: str, span_id: str) -> Iterator[None]:
    """The next span started in this context gets `span_id` (and, as a root, `trace_id`)."""
    token = _forced.set((int(trace_id, 16), int(span_id, 16)))
    try:
        yield
    finally:
        _forced.reset(token)


def forced() -> tuple[int, int] | None:
    """The (trace id, span id) `forcing` set in this context, if any."""
    return _forced.get()


def honour(on: bool = True) -> None:
    """Say whether the tracer provider in use takes forced ids (only graphrunner's own does)."""
    global _honoured
    _honoured = on


def honoured() -> bool:
    """True when spans emitted at their end can get their derived ids."""
    return _honoured
