"""`format_step`: the one-line progress format of DESIGN §5."""

from __future__ import annotations

from typing import Any

import pytest

from graphrunner.cli.progress import format_duration, format_step, shorten


def record(**fields: Any) -> dict[str, Any]:
    """A step record as the in-process runner hands it to `on_step`."""
    base: dict[str, Any] = {
        "step": 3,
        "node": "summarize",
        "status": "ok",
        "next_node": "done",
        "changed_keys": (),
        "error": None,
        "duration_ms": 12.4,
    }
    return {**base, **fields}


def test_ok_step_with_changed_keys() -> None:
    line = format_step("examples/fetch", record(changed_keys=("summary", "meta")))
    assert line == "[graph:examples/fetch] step 3 summarize ✓ 12ms (+summary, meta)"


def test_no_parenthesis_without_changed_keys() -> None:
    assert format_step("g", record()) == "[graph:g] step 3 summarize ✓ 12ms"


@pytest.mark.parametrize(("status", "symbol"), [("end", "⏹"), ("paused", "⏸"), ("weird", "?")])
def test_status_symbols(status: str, symbol: str) -> None:
    assert format_step("g", record(status=status)) == f"[graph:g] step 3 summarize {symbol} 12ms"


def test_error_step_appends_the_shortened_message() -> None:
    error = {"type": "node_exception", "message": "boom " * 40 + "\ntraceback line", "node": "summarize"}
    line = format_step("g", record(status="error", error=error, duration_ms=3))
    assert line.startswith("[graph:g] step 3 summarize ✗ 3ms — boom boom")
    assert line.endswith("…")
    assert "traceback line" not in line
    assert len(line) < 140


def test_error_without_message_shows_its_type() -> None:
    line = format_step("g", record(status="error", error={"type": "routing_error"}))
    assert line.endswith("✗ 12ms — routing_error")


def test_missing_duration_is_omitted() -> None:
    assert format_step("g", record(duration_ms=None)) == "[graph:g] step 3 summarize ✓"


@pytest.mark.parametrize(
    ("ms", "text"),
    [(0.2, "<1ms"), (0.6, "1ms"), (12.4, "12ms"), (9999.0, "9999ms"), (12_345.0, "12.3s"), ("x", "")],
)
def test_format_duration(ms: Any, text: str) -> None:
    assert format_duration(ms) == text


def test_shorten_keeps_short_single_lines() -> None:
    assert shorten("  fine  ") == "fine"
    assert shorten("a\nb") == "a…"
    assert shorten("x" * 100, limit=10) == "x" * 9 + "…"


def test_a_child_runs_progress_line_says_where_it_is() -> None:
    from graphrunner.cli.run import label
    from graphrunner.engine import RunSnapshot

    assert label(RunSnapshot(run_id="r1", graph_id="research/main")) == "research/main"
    branch = RunSnapshot(run_id="r1.1.web", graph_id="research/web", depth=1)
    item = RunSnapshot(run_id="r1.2.7", graph_id="docs/process", depth=1)
    assert (label(branch), label(item)) == ("research/web 1.web", "docs/process 2.7")
