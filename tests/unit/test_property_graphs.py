"""Property tests (issue 12): any graph text, generated to the schema's shape or made by
mutating the bytes of the example graphs, either loads or raises `GraphValidationError`;
`graphrunner validate` answers 0, 1 or 2 with a report, never a traceback.

Bounded and reproducible (derandomized, no example database); `GRAPHRUNNER_FUZZ=20` runs
twenty times the examples with fresh randomness to hunt for new failures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from strategies import FRIENDLY, GRAPHS, JSONISH, RUNNABLE, fuzz, tweaked

from graphrunner.cli import main
from graphrunner.errors import GraphrunnerError, GraphValidationError
from graphrunner.loading import inspect_graph, load_graph, parse_graph
from graphrunner.settings import Settings

EXAMPLES = sorted(Path(__file__).parents[2].joinpath("graphs").glob("*.yaml"))
SETTINGS = Settings(graph_path=())
PAYLOADS = st.binary(max_size=6) | st.sampled_from(
    [
        b"{",
        b"}",
        b"[",
        b"]",
        b"&a ",
        b"*a",
        b"<<: *a\n",
        b"!!binary ",
        b"!!set ",
        b"!!python/name:os.system ",
        b"\t",
        b": ",
        b"\n- ",
        b"\n  ",
        b"${",
        b"${state.x / 0}",
        b"\xff",
        b"\xc2\xb2",
        b"\xed\xa0\x80",
        b"9" * 4400,
        b"0x" + b"f" * 4000,
        b"x[y: 1\n",
        b"type: ",
        b"reducer: [1.5]",
        b"branches: 1.5",
        b"? [a]\n",
        b"~",
        b".nan",
        b"'",
        b'"',
    ]
)
MUTATIONS = st.lists(
    st.tuples(st.sampled_from(["insert", "replace", "delete", "duplicate"]), st.floats(0, 1), PAYLOADS),
    min_size=1,
    max_size=4,
)


def render(doc: Any, style: str) -> str:
    """A generated document as YAML text: block style, flow style or JSON."""
    if style == "json":
        return json.dumps(doc)
    return yaml.safe_dump(doc, default_flow_style=style == "flow", allow_unicode=True)


def mutate(data: bytes, mutations: list[tuple[str, float, bytes]]) -> bytes:
    """`data` with each mutation applied at its relative position."""
    for kind, where, payload in mutations:
        at = int(where * len(data))
        if kind == "insert":
            data = data[:at] + payload + data[at:]
        elif kind == "replace":
            data = data[:at] + payload + data[at + len(payload) :]
        elif kind == "delete":
            data = data[:at] + data[at + 1 + len(payload) :]
        else:
            data = data[:at] + data[at : at + 40] + data[at:]
    return data


def loads_or_is_invalid(text: str, file: Path) -> None:
    """Parse `text`; the only failure allowed is a `GraphValidationError` with located issues.

    `file` sits in an empty directory: subgraphs are looked up next to it.
    """
    try:
        graph = parse_graph(text, file=str(file), settings=SETTINGS)
    except GraphValidationError as exc:
        assert exc.issues
        assert all(issue.code and issue.message and issue.file == str(file) for issue in exc.issues)
        return
    assert graph.validate().valid


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory for graph files; its `empty/` stays empty (subgraph lookups find nothing)."""
    path = tmp_path_factory.mktemp("fuzz")
    (path / "empty").mkdir()
    return path


def test_the_examples_are_there() -> None:
    assert len(EXAMPLES) >= 3


@fuzz(80)
@given(doc=GRAPHS, style=st.sampled_from(["block", "flow", "json"]))
def test_generated_graphs_load_or_are_invalid(scratch: Path, doc: Any, style: str) -> None:
    try:
        text = render(doc, style)
    except (yaml.YAMLError, ValueError, TypeError):  # a document YAML or JSON cannot write
        return
    loads_or_is_invalid(text, scratch / "empty" / "g.yaml")


@fuzz(60)
@given(data=st.data(), doc=RUNNABLE)
def test_generated_graphs_with_a_hostile_token(scratch: Path, data: st.DataObject, doc: Any) -> None:
    """A huge integer, an escaped lone surrogate, a bracket or "²" where a scalar was."""
    try:
        text = render(doc, "block")
    except (yaml.YAMLError, ValueError, TypeError):
        return
    loads_or_is_invalid(data.draw(tweaked(text)), scratch / "empty" / "g.yaml")


@fuzz(50)
@given(doc=RUNNABLE, inputs=st.dictionaries(st.sampled_from(["a", "b", "l"]), FRIENDLY | JSONISH, max_size=3))
def test_generated_graphs_that_load_run_to_a_result(scratch: Path, doc: Any, inputs: dict[str, Any]) -> None:
    """Valid generated graphs (echo and fail tools, random expressions) run in-process."""
    try:
        graph = parse_graph(render(doc, "block"), file=str(scratch / "empty" / "g.yaml"), settings=SETTINGS)
    except (GraphValidationError, yaml.YAMLError, ValueError, TypeError):
        return
    try:
        result = graph.invoke_sync(inputs)
    except GraphrunnerError as exc:  # inputs refused before the run
        assert str(exc)
        return
    assert result.status in ("completed", "completed_with_errors", "failed", "paused")
    assert result.status != "failed" or (result.error is not None and result.error.message)


@fuzz(120)
@given(index=st.integers(0, 10), mutations=MUTATIONS)
def test_mutated_example_graphs_load_or_are_invalid(
    scratch: Path, index: int, mutations: list[tuple[str, float, bytes]]
) -> None:
    data = mutate(EXAMPLES[index % len(EXAMPLES)].read_bytes(), mutations)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return  # a file that is not UTF-8: test_mutated_files_through_inspect_and_validate
    loads_or_is_invalid(text, scratch / "empty" / "g.yaml")


@fuzz(30)
@given(index=st.integers(0, 10), mutations=MUTATIONS)
def test_mutated_files_through_inspect_and_validate(
    scratch: Path, index: int, mutations: list[tuple[str, float, bytes]]
) -> None:
    path = scratch / "g.yaml"
    path.write_bytes(mutate(EXAMPLES[index % len(EXAMPLES)].read_bytes(), mutations))
    try:
        graph, report = inspect_graph(path, settings=SETTINGS)
    except GraphValidationError as exc:  # unreadable: not UTF-8
        assert exc.issues and exc.source == str(path)
    else:
        assert (graph is None) == (not report.valid)
        if graph is None:
            with pytest.raises(GraphValidationError):
                load_graph(path, settings=SETTINGS)
    assert_validate_answers(path)


@fuzz(25)
@given(doc=GRAPHS)
def test_generated_files_through_validate(scratch: Path, doc: Any) -> None:
    path = scratch / "gen.yaml"
    try:
        path.write_text(render(doc, "block"), encoding="utf-8")
    except (yaml.YAMLError, ValueError, TypeError):
        return
    assert_validate_answers(path)


def assert_validate_answers(path: Path) -> None:
    """`validate` and `validate --json` on `path` plus a good graph: both reported, no traceback."""
    good = str(EXAMPLES[0])
    for extra in ([], ["--json"]):
        result = CliRunner().invoke(main, ["validate", *extra, str(path), good])
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        assert result.exit_code in (0, 1), result.output
        assert "Traceback" not in result.output
        if extra:
            reports = json.loads(result.stdout)
            assert len(reports) == 2 and reports[1]["valid"] is True
        else:
            summaries = [
                line for line in result.stdout.splitlines() if line.startswith((f"{path}: ", f"{good}: "))
            ]
            assert len(summaries) == 2 and summaries[1].startswith(f"{good}: valid")
