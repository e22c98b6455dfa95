"""The Rye graph fixtures of tests/rye, run in-process and on the cluster (issue 16).

Each fixture is a Rye graph tool as written; tests/rye/expected.yaml says what the Rye walker
gives for it (status, path, state, output, suppressed errors), derived from the walker's
documentation. Every run must give that, and a cluster run the same as an in-process run.
The files of tests/rye/bad must be refused with one located error, by `inspect_graph` and by
`graphrunner validate`.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from rye_fixtures import (
    BadCase,
    RunCase,
    copy_fixtures,
    load_expectations,
    mismatches,
    summary,
    with_dirs,
)

from graphrunner import Graph, GraphValidationError, RunResult, load_graph
from graphrunner.loading.loader import inspect_graph
from graphrunner.settings import Settings

SESSION = uuid.uuid4().hex[:8]
SUFFIX = f"-rye{SESSION}"  # graph ids unique to this test session (the cluster's Redis is shared)
RUN_CASES, BAD_CASES = load_expectations()
WAIT_S = 60


def run_param(case: RunCase) -> Any:
    """The case as a test parameter; a known disagreement with the walker is a strict xfail that
    must fail by a mismatch (or by loading refusing the file), never by some other error."""
    reason = case.expect.get("xfail")
    raises = (AssertionError, GraphValidationError)
    marks = [pytest.mark.xfail(strict=True, reason=reason, raises=raises)] if reason else []
    return pytest.param(case, id=case.id, marks=marks)


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The runnable fixtures with session-unique ids, in one folder (the graph path)."""
    folder = tmp_path_factory.mktemp("rye-fixtures")
    copy_fixtures(folder, SUFFIX)
    return folder


def load(case: RunCase, folder: Path) -> Graph:
    path = folder / f"{case.fixture}{SUFFIX}.yaml"
    return load_graph(path, settings=Settings(graph_path=(folder,)))


class Runs:
    """Runs one case, each run with its own "@tmp" directories."""

    def __init__(self, case: RunCase, tmp_path: Path) -> None:
        self.case = case
        self.counter = itertools.count()
        self.tmp_path = tmp_path
        self.replacements = {SUFFIX: ""}

    def make_dir(self) -> Path:
        folder = self.tmp_path / f"run-{next(self.counter)}"
        folder.mkdir()
        return folder

    def inputs(self) -> dict[str, Any]:
        inputs, made = with_dirs(self.case.inputs, self.make_dir)
        self.replacements.update({d: "@tmp" for d in made})
        return inputs

    def check(self, result: RunResult) -> dict[str, Any]:
        got = summary(result, self.replacements)
        problems = mismatches(self.case, got)
        assert not problems, "\n".join([f"{self.case.id}:", *problems, f"run: {got}"])
        return got


def check_loaded(case: RunCase, graph: Graph, folder: Path) -> None:
    """The graph's id, version and description, and the warnings loading reports."""
    want = case.expect.get("graph") or {}
    spec = graph.spec
    got = {"id": spec.id.replace(SUFFIX, ""), "version": spec.version, "description": spec.description}
    assert {k: got[k] for k in want} == want
    if "warnings" in case.expect:
        path = folder / f"{case.fixture}{SUFFIX}.yaml"
        report = inspect_graph(path, settings=Settings(graph_path=(folder,)))[1]
        found = {(w.code, w.line) for w in report.warnings}
        for code, line in case.expect["warnings"]:
            assert (code, line) in found, report.warnings


def check_rejected(case: RunCase, submit: Any) -> None:
    """Invalid inputs raise before the run starts: the expected error class, naming the input."""
    want = case.expect["rejects"]
    with pytest.raises(Exception) as caught:
        submit()
    assert type(caught.value).__name__ == want["error"], caught.value
    assert want["match"] in str(caught.value)


@pytest.mark.parametrize("mode", ["in_process", pytest.param("cluster", marks=pytest.mark.integration)])
@pytest.mark.parametrize("case", [run_param(c) for c in RUN_CASES])
def test_rye_fixture(
    case: RunCase, mode: str, fixture_dir: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    graph = load(case, fixture_dir)
    check_loaded(case, graph, fixture_dir)
    runs = Runs(case, tmp_path)
    if mode == "cluster":
        client = request.getfixturevalue("cluster")
        if "rejects" in case.expect:
            check_rejected(case, lambda: client.submit(graph, runs.inputs()))
            return
        on_cluster = runs.check(client.submit(graph, runs.inputs()).wait(timeout=WAIT_S))
        in_process = runs.check(graph.invoke_sync(runs.inputs()))
        assert on_cluster == in_process  # the cluster's run equals the in-process one
        return
    if "rejects" in case.expect:
        check_rejected(case, lambda: graph.invoke_sync(runs.inputs()))
        return
    runs.check(graph.invoke_sync(runs.inputs()))


@pytest.mark.parametrize("case", BAD_CASES, ids=lambda c: c.fixture)
def test_bad_rye_file_is_refused_with_a_located_error(case: BadCase) -> None:
    report = inspect_graph(case.path, settings=Settings())[1]
    assert [(e.code, e.line) for e in report.errors] == [(case.code, case.line)], report.errors
    for words in case.words:
        assert words in report.errors[0].message


@pytest.mark.parametrize("case", BAD_CASES, ids=lambda c: c.fixture)
def test_graphrunner_validate_refuses_a_bad_rye_file(case: BadCase) -> None:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    proc = subprocess.run(
        [sys.executable, "-m", "graphrunner", "validate", str(case.path)],
        capture_output=True,
        encoding="utf-8",
        env=env,
        check=False,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    where = f"{case.path}:{case.line}" if case.line is not None else f"{case.path}"
    assert f"{where}: [{case.code}]" in proc.stdout, proc.stdout
    assert "Traceback" not in proc.stderr
