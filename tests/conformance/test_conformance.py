"""Every conformance fixture (tests/conformance/fixtures), run in-process and on the cluster.

A fixture with `expected_compile_error` is only loaded (once). Any other is translated to
graphrunner YAML and run `run_count` times in each mode; every run must give the expected
status, final state, execution order, error category, failing node and state at failure,
and the cluster's runs the same state, path and error as an in-process run.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from conformance_fixtures import Case, load_cases, write_graphs

from graphrunner import GraphValidationError, NodeError, RunError, RunResult, load_graph
from graphrunner.errors import RUN_ERROR_CLASSES

SESSION = uuid.uuid4().hex[:8]  # graph ids unique to this test session
CASES = load_cases()
RUNNABLE = [c for c in CASES if c.expected_compile_error is None]
INVALID = [c for c in CASES if c.expected_compile_error is not None]
WAIT_S = 30


def write_case(case: Case, folder: Path) -> Path:
    """The case's graph files in `folder`, with ids unique to this session."""
    return write_graphs(case, folder, f"conformance-{SESSION}-{re.sub(r'[^a-z0-9]+', '-', case.id.lower())}")


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.id)
def test_compile_error(case: Case, tmp_path: Path) -> None:
    path = write_case(case, tmp_path)
    with pytest.raises(GraphValidationError) as caught:
        load_graph(path)
    assert case.expected_compile_error in caught.value.codes, caught.value


@pytest.mark.parametrize("mode", ["in_process", pytest.param("cluster", marks=pytest.mark.integration)])
@pytest.mark.parametrize("case", RUNNABLE, ids=lambda c: c.id)
def test_fixture(case: Case, mode: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    graph = load_graph(write_case(case, tmp_path))
    if mode == "cluster":
        client = request.getfixturevalue("cluster")
        results = [client.submit(graph).wait(timeout=WAIT_S) for _ in range(case.run_count)]
        results.append(graph.invoke_sync())  # the cluster's result must equal the in-process one
    else:
        results = [graph.invoke_sync() for _ in range(case.run_count)]
    for result in results:
        check(case, result)
    assert len({repr(summary(r)) for r in results}) == 1, [summary(r) for r in results]


def check(case: Case, result: RunResult) -> None:
    """The result matches the case's `expected` or `expected_error`."""
    if case.expected is not None:
        assert (result.status, result.error) == ("completed", None)
        assert fields(result.state) == case.expected["final_state"]
        assert result.path == case.expected["execution_order"]
        return
    want = case.expected_error or {}
    error = result.error.to_dict() if result.error is not None else {}
    assert result.status == "failed", result
    assert error.get("type") == want["category"], error
    assert error.get("node") == want.get("raised_from", error.get("node"))
    messages = want.get("message", [])  # a substring of the message, or a list of them
    for message in [messages] if isinstance(messages, str) else messages:
        assert message in error.get("message", ""), error
    for key in ("field", "reducer"):
        assert error.get(key) == want.get(key, error.get(key)), error
    if "execution_order" in want:
        assert result.path == want["execution_order"]
    if "recoverable_state" in want:
        assert fields(result.state) == want["recoverable_state"]
        with pytest.raises(RunError) as caught:
            result.raise_for_error()
        assert isinstance(caught.value, RUN_ERROR_CLASSES.get(want["category"], NodeError))
        assert caught.value.category == want["category"]
        assert fields(caught.value.state or {}) == want["recoverable_state"]


def fields(state: dict[str, Any]) -> dict[str, Any]:
    """The state without graphrunner's own bookkeeping (`_last_error`, DESIGN §2.5)."""
    return {k: v for k, v in state.items() if not k.startswith("_")}


def summary(result: RunResult) -> dict[str, Any]:
    """What must be identical between runs and modes: all but ids, timings and messages."""
    shown = result.error.to_dict() if result.error is not None else {}
    error = {k: v for k, v in shown.items() if k in ("type", "node", "field", "reducer")}
    return {"status": result.status, "state": result.state, "path": result.path, "error": error}
