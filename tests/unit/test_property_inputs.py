"""Property tests (issue 12): random inputs, initial state and resume patches (wrong types,
huge, deep, NaN, unicode, keys that are not text) through `graph.invoke`, the engine's
`begin` and `resume` give a run result or a `GraphrunnerError`, never another exception.
Bounded and reproducible (see strategies.fuzz).
"""

from __future__ import annotations

import json
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from strategies import FRIENDLY, HOSTILE, JSONISH, NAMES, ODD, TEXT, fuzz

from graphrunner import Graph, parse_graph
from graphrunner.cli import main
from graphrunner.engine import RunStatus, begin
from graphrunner.engine.start import resume
from graphrunner.errors import GraphrunnerError, ResumeError
from graphrunner.settings import Settings

TYPED = parse_graph(
    textwrap.dedent("""
    id: typed
    inputs:
      a: {type: integer, default: 1}
      b: {type: number}
      l: {type: list, default: []}
      name: {type: string, enum: [x, y, "${a}"]}
      o: {type: object}
      any: {}
    state:
      x: {type: any}
      n: {type: integer, default: 0}
      items: {type: list, default: [], reducer: append}
      meta: {type: object, default: {}, reducer: merge}
      seen: {type: list, default: [], reducer: {name: dedupe_append, key: id}}
    config: {start: mix}
    nodes:
      mix:
        type: gate
        assign:
          x: "${inputs.a / inputs.b}"
          items: ["${inputs.l}", "n=${state.n} any=${inputs.any}"]
          meta: {o: "${inputs.o}", x: "${state.x}"}
          seen: "${inputs.l}"
        next:
          - {to: each, when: {path: inputs.name, op: matches, value: "^x"}}
          - {to: each, when: "size(inputs.l) > inputs.a"}
          - to: wait
      each:
        type: foreach
        over: "${inputs.l}"
        action: {tool: echo, params: {v: "${item}", i: "${index}", s: "${size(state.items)}"}}
        collect: items
        next: wait
      wait:
        type: pause
        next: done
      done:
        type: return
        output: {x: "${state.x}", items: "${state.items}", text: "${state.meta} ${inputs.o}"}
    """),
    settings=Settings(),
)
OPEN = parse_graph(
    textwrap.dedent("""
    id: open
    config: {start: done}
    nodes:
      done: {type: return, output: {all: "${inputs}", state: "${state}", n: "${size(inputs)}"}}
    """),
    settings=Settings(),
)
NOW = datetime(2026, 1, 1, tzinfo=UTC)
VALUES = FRIENDLY | HOSTILE | JSONISH
KEYS = st.sampled_from(["a", "b", "l", "name", "o", "any", "x", "n", "items", "meta", "seen"]) | NAMES | TEXT
MAPPINGS = st.dictionaries(KEYS, VALUES, max_size=4) | st.dictionaries(
    KEYS | ODD.filter(_hashable := lambda k: isinstance(k, int | tuple | type(None))), VALUES, max_size=2
)
ANYTHING = MAPPINGS | VALUES | st.none()


def run(graph: Graph, inputs: Any, state: Any) -> None:
    try:
        result = graph.invoke_sync(inputs, state=state)
    except GraphrunnerError as exc:
        assert str(exc)
        return
    assert result.status in {"completed", "completed_with_errors", "failed", "paused"}
    if result.status == "failed":
        assert result.error is not None and result.error.message


@fuzz(120)
@given(inputs=ANYTHING, state=ANYTHING)
def test_invoke_a_typed_graph(inputs: Any, state: Any) -> None:
    run(TYPED, inputs, state)


@fuzz(60)
@given(inputs=ANYTHING, state=ANYTHING)
def test_invoke_a_graph_without_declarations(inputs: Any, state: Any) -> None:
    run(OPEN, inputs, state)


@fuzz(100)
@given(inputs=ANYTHING, state=ANYTHING, patch=ANYTHING)
def test_begin_and_resume(inputs: Any, state: Any, patch: Any) -> None:
    try:
        snap = begin(TYPED, inputs, run_id="r", state=state, max_state_bytes=1_000_000)
    except GraphrunnerError:
        snap = begin(TYPED, {"b": 2}, run_id="r")
    paused = snap.model_copy(update={"status": RunStatus.PAUSED, "node": "wait"})
    try:
        resumed = resume(TYPED, paused, NOW, patch, max_state_bytes=1_000_000)
    except (GraphrunnerError, ResumeError):
        return
    assert resumed.status in (RunStatus.RUNNING, RunStatus.COMPLETED)


CLI_GRAPH = """
id: cli
inputs: {a: {type: integer, default: 1}, b: {type: number, default: 2}, l: {type: list, default: []}, s: {}}
config: {start: go}
nodes:
  go:
    action: {tool: echo, params: {q: "${inputs.a / inputs.b}", t: "s=${inputs.s}", n: "${size(inputs.l)}"}}
    next: done
  done: {type: return, output: {q: "${state}", s: "${inputs.s}"}}
"""
ARG_TEXT = TEXT | st.sampled_from(
    ["[" * 1200 + "]" * 1200, "NaN", "-Infinity", "1e999", "1" * 5000, '"\\ud800"', "{}", "[1]"]
)
JSON_TEXT = (
    st.dictionaries(st.sampled_from(["a", "b", "l", "s", "x"]), JSONISH, max_size=3).map(json.dumps)
    | ARG_TEXT
    | st.builds(lambda n: '{"s": ' + "[" * n + "]" * n + "}", st.sampled_from([10, 70, 1200, 5000]))
)


@pytest.fixture(scope="module")
def cli_graph(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "cli.yaml"
    path.write_text(textwrap.dedent(CLI_GRAPH), encoding="utf-8")
    return path


@fuzz(40)
@given(
    pairs=st.lists(st.tuples(st.sampled_from(["a", "b", "l", "s", "x", ""]), ARG_TEXT), max_size=3),
    inputs=st.none() | JSON_TEXT,
)
def test_run_in_process_with_any_inputs(
    cli_graph: Path, pairs: list[tuple[str, str]], inputs: str | None
) -> None:
    """`-i k=v` and `--inputs` of any text: exit 0, 1 or 2 with a message, never a traceback."""
    args = ["run", "--in-process", str(cli_graph), "--json"]
    args += [f"--input={key}={value}" for key, value in pairs]
    args += ["--inputs", inputs] if inputs is not None else []
    result = CliRunner().invoke(main, args, env={"GRAPHRUNNER_QUIET": "1"})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in (0, 1, 2)
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        assert result.stderr.strip()
    else:
        assert json.loads(result.stdout)["status"] in ("completed", "failed")
