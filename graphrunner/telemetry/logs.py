"""Worker log records that say which run, step and node they are about, and in which trace.

The executor and the item runner wrap each step and item in `step_context` / `item_context`;
`ContextFilter`, on every handler of a worker's loggers, gives each record `run_id`, `step`,
`node`, `item`, `trace_id` and `span_id` (empty strings outside a step or a span), so a format
may name them (`%(run_id)s`). `install` sets a worker's handlers up by GRAPHRUNNER_LOG_FORMAT:

- `text` (the default): the worker's own format, with `[run R step S node N trace T]` before the
  message of a line logged during a step;
- `json`: one JSON object per line (`JsonFormatter`): time, level, logger, message, the ids
  above (null when there are none), the process id and the traceback as text.

The trace id is that of the span current where the line is logged (OpenTelemetry's context), so a
line leads to its trace, and the trace's run id back to the run's lines.
"""

from __future__ import annotations

import copy
import json
import logging
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace

from graphrunner.errors import ConfigurationError
from graphrunner.settings import LOG_FORMATS

FIELDS = ("run_id", "step", "node", "item", "trace_id", "span_id")


@dataclass(frozen=True)
class StepContext:
    """What a worker is doing: a step of a run (at a node), or one foreach item of it."""

    run_id: str
    step: int
    node: str | None
    item: int | None = None


_current: ContextVar[StepContext | None] = ContextVar("graphrunner_log_context", default=None)


class _Within:
    """Log lines of the block are about `context` (a class, not a generator: it is entered once
    per step, traced or not)."""

    __slots__ = ("context", "token")

    def __init__(self, context: StepContext) -> None:
        self.context = context

    def __enter__(self) -> StepContext:
        self.token = _current.set(self.context)
        return self.context

    def __exit__(self, *exc: object) -> None:
        _current.reset(self.token)


def step_context(run_id: str, step: int, node: str | None) -> AbstractContextManager[StepContext]:
    """Log lines of the block are about step `step` (as the transcript numbers it) of run `run_id`."""
    return _Within(StepContext(run_id, step, node))


def item_context(run_id: str, step: int, node: str | None, index: int) -> AbstractContextManager[StepContext]:
    """Log lines of the block are about foreach item `index` of the step."""
    return _Within(StepContext(run_id, step, node, index))


def current() -> StepContext | None:
    """The step (or item) this context's log lines are about, if any."""
    return _current.get()


class ContextFilter(logging.Filter):
    """Gives every record the run, step, node, item, trace and span ids (empty when none)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Add the ids to `record` (those it carries already stay); never drops it."""
        if hasattr(record, "run_id"):
            return True
        context = _current.get()
        record.run_id = context.run_id if context else ""
        record.step = context.step if context else ""
        record.node = (context.node or "") if context else ""
        record.item = context.item if context and context.item is not None else ""
        span = trace.get_current_span().get_span_context()
        record.trace_id = format(span.trace_id, "032x") if span.is_valid else ""
        record.span_id = format(span.span_id, "016x") if span.is_valid else ""
        return True


def tag(record: logging.LogRecord) -> str:
    """`[run R step S node N item I trace T]` for a record logged during a step, else ''."""
    run_id = getattr(record, "run_id", "")
    if not run_id:
        return ""
    parts = ["run", run_id, "step", str(getattr(record, "step", ""))]
    for name in ("node", "item", "trace"):
        value = getattr(record, "trace_id" if name == "trace" else name, "")
        if value != "":
            parts += [name, str(value)]
    return f"[{' '.join(parts)}]"


class TextFormatter(logging.Formatter):
    """Another formatter's lines, with `tag` before the message of a line logged during a step."""

    def __init__(self, inner: logging.Formatter | None = None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter("[%(asctime)s: %(levelname)s/%(processName)s] %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        """The inner formatter's line for `record`, tagged."""
        marked = tag(record)
        if not marked:
            return self.inner.format(record)
        tagged = copy.copy(record)  # the other handlers see the record as it was
        tagged.msg, tagged.args = f"{marked} {record.getMessage()}", None
        return self.inner.format(tagged)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC), level, logger, message, the ids, pid, exc_info."""

    def format(self, record: logging.LogRecord) -> str:
        """`record` as a JSON object on one line."""
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, "")
            line[name] = None if value == "" else value
        line["pid"] = record.process
        if record.exc_info:
            record.exc_text = record.exc_text or self.formatException(record.exc_info)
        line["exc_info"] = record.exc_text or None
        if record.stack_info:
            line["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure(logger: logging.Logger, log_format: str) -> None:
    """Give every handler of `logger` the `ContextFilter` and the formatter of `log_format`
    (`text` keeps the handler's own format, tagged); doing it again changes nothing."""
    check(log_format)
    for handler in logger.handlers:
        if not any(isinstance(f, ContextFilter) for f in handler.filters):
            handler.addFilter(ContextFilter())
        current = handler.formatter
        if log_format == "json" and not isinstance(current, JsonFormatter):
            handler.setFormatter(JsonFormatter())
        elif log_format == "text" and not isinstance(current, TextFormatter | JsonFormatter):
            handler.setFormatter(TextFormatter(current))


def check(log_format: str) -> None:
    """Refuse a format that is not one of `LOG_FORMATS` (`ConfigurationError`)."""
    if log_format not in LOG_FORMATS:
        raise ConfigurationError(
            f"GRAPHRUNNER_LOG_FORMAT must be one of {', '.join(LOG_FORMATS)}, got {log_format!r}"
        )


_installed: list[str] = []  # the format `install` set (for Celery's signal handlers)


def install(log_format: str) -> None:
    """Configure the loggers Celery sets up in this worker (root and task loggers) by
    `log_format`, when it sets them up (its `after_setup_logger` / `after_setup_task_logger`)."""
    from celery import signals

    check(log_format)
    _installed[:] = [log_format]
    signals.after_setup_logger.connect(_set_up, weak=False, dispatch_uid="graphrunner-logs")
    signals.after_setup_task_logger.connect(_set_up, weak=False, dispatch_uid="graphrunner-task-logs")


def _set_up(logger: logging.Logger | None = None, **_: Any) -> None:
    if logger is not None and _installed:
        configure(logger, _installed[0])
