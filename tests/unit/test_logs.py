"""Worker log lines carry their run, step, node, trace and span ids; JSON lines; the setting."""

from __future__ import annotations

import io
import json
import logging
import uuid
from collections.abc import Iterator

import pytest
from celery import signals
from click.testing import CliRunner
from opentelemetry.sdk.trace import TracerProvider

from graphrunner.cli import main
from graphrunner.errors import ConfigurationError
from graphrunner.settings import Settings
from graphrunner.telemetry import logs


@pytest.fixture
def stream() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """A logger of this test's own writing to a string, its handler configured as a worker's."""
    out = io.StringIO()
    logger = logging.getLogger(f"graphrunner.test.{uuid.uuid4().hex}")
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    yield logger, out
    logger.handlers.clear()


def records_of(logger: logging.Logger) -> list[logging.LogRecord]:
    """Capture the records `logger` emits, filtered as a worker's handlers filter them."""
    kept: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            kept.append(record)

    handler = Keep()
    handler.addFilter(logs.ContextFilter())
    logger.addHandler(handler)
    return kept


def test_the_filter_adds_the_step_and_the_current_span(stream: tuple[logging.Logger, io.StringIO]) -> None:
    logger, _ = stream
    kept = records_of(logger)
    tracer = TracerProvider().get_tracer("test")  # a real SDK span, no global provider
    with logs.step_context("run-1", 3, "fetch"), tracer.start_as_current_span("step") as span:
        logger.info("inside")
    logger.info("outside")
    with logs.item_context("run-1", 3, "each", 7):
        logger.info("an item")

    inside, outside, item = (ids(record) for record in kept)
    context = span.get_span_context()
    trace_id, span_id = format(context.trace_id, "032x"), format(context.span_id, "016x")
    assert inside == {
        "run_id": "run-1",
        "step": 3,
        "node": "fetch",
        "item": "",
        "trace_id": trace_id,
        "span_id": span_id,
    }
    assert len(trace_id) == 32 and len(span_id) == 16 and context.trace_id != 0
    assert outside == dict.fromkeys(logs.FIELDS, "")
    assert item == {"run_id": "run-1", "step": 3, "node": "each", "item": 7, "trace_id": "", "span_id": ""}
    assert logs.current() is None


def ids(record: logging.LogRecord) -> dict[str, object]:
    return {name: getattr(record, name) for name in logs.FIELDS}


def test_json_lines_one_object_per_line(stream: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = stream
    logs.configure(logger, "json")
    logs.configure(logger, "json")  # again: changes nothing
    assert len(logger.handlers[0].filters) == 1
    tracer = TracerProvider().get_tracer("test")
    with logs.step_context("run-2", 1, "a"), tracer.start_as_current_span("step"):
        logger.warning("failed\nover two lines")
        try:
            raise ValueError("boom")
        except ValueError:
            logger.exception("with a traceback")
    logger.info("no step")

    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    first, second, third = (json.loads(line) for line in lines)
    assert first["message"] == "failed\nover two lines"
    assert (first["level"], first["logger"]) == ("WARNING", logger.name)
    assert (first["run_id"], first["step"], first["node"], first["item"]) == ("run-2", 1, "a", None)
    assert len(first["trace_id"]) == 32 and len(first["span_id"]) == 16
    assert first["time"].endswith("+00:00") and first["pid"] > 0 and first["exc_info"] is None
    assert second["exc_info"].startswith("Traceback") and "ValueError: boom" in second["exc_info"]
    assert second["trace_id"] == first["trace_id"]
    assert {k: third[k] for k in logs.FIELDS} == dict.fromkeys(logs.FIELDS)


def test_text_lines_of_a_step_are_tagged(stream: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = stream
    logs.configure(logger, "text")
    logs.configure(logger, "text")
    with logs.step_context("run-3", 2, "b"):
        logger.warning("step %s failed", 2)
    logger.warning("no step")
    tracer = TracerProvider().get_tracer("test")
    with logs.item_context("run-3", 2, "each", 0), tracer.start_as_current_span("item") as span:
        logger.warning("item")

    trace_id = format(span.get_span_context().trace_id, "032x")
    assert out.getvalue().splitlines() == [
        "WARNING [run run-3 step 2 node b] step 2 failed",
        "WARNING no step",
        f"WARNING [run run-3 step 2 node each item 0 trace {trace_id}] item",
    ]


def test_celery_set_up_loggers_are_configured_once_installed(
    stream: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, out = stream
    logs.install("json")
    try:
        signals.after_setup_logger.send(sender=None, logger=logger, loglevel=logging.INFO)
        with logs.step_context("run-4", 1, "a"):
            logger.info("hello")
    finally:
        signals.after_setup_logger.disconnect(dispatch_uid="graphrunner-logs")
        signals.after_setup_task_logger.disconnect(dispatch_uid="graphrunner-task-logs")
    assert json.loads(out.getvalue())["run_id"] == "run-4"


def test_an_unknown_log_format_names_the_variable_and_the_formats(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHRUNNER_LOG_FORMAT", "JSON")
    assert Settings.from_env().log_format == "json"
    monkeypatch.setenv("GRAPHRUNNER_LOG_FORMAT", "xml")
    with pytest.raises(ValueError, match="GRAPHRUNNER_LOG_FORMAT must be one of text, json, got 'xml'"):
        Settings.from_env()
    with pytest.raises(ConfigurationError, match="GRAPHRUNNER_LOG_FORMAT must be one of text, json"):
        logs.install("xml")

    monkeypatch.setenv("GRAPHRUNNER_REDIS_URL", "redis://127.0.0.1:1/0")
    result = CliRunner().invoke(main, ["worker"])
    assert result.exit_code == 2
    assert "GRAPHRUNNER_LOG_FORMAT must be one of text, json, got 'xml'" in result.output
