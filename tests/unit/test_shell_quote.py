"""`shell_quote` (issue 24): a value quoted for a POSIX shell reads back as exactly that value,
whatever it holds, in every `${...}` of any graph, Rye graph files included."""

from __future__ import annotations

import logging
import shlex
import shutil
import subprocess
from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import FRIENDLY, HOSTILE, JSONISH, fuzz

from graphrunner import load_graph
from graphrunner.errors import ExpressionError
from graphrunner.expressions import compile_template, render_text
from graphrunner.expressions.cel_expr import CelExpression
from graphrunner.expressions.functions import FunctionCall, shell_quote
from graphrunner.expressions.template import compile_expression
from graphrunner.settings import Settings

NS = frozenset({"state", "inputs"})
SHELLS = [s for s in ("/bin/sh", shutil.which("bash"), shutil.which("dash")) if s]
# what a shell must never read as syntax: quotes, substitutions, separators, comments, globs,
# expansions, options, whitespace, the empty word, and text outside ASCII
HOSTILE_TEXT = [
    "",
    " ",
    "a b",
    "'",
    "''",
    '"',
    "it's",
    "'\"'\"'",
    "$(id -u)",
    "`id -u`",
    "${HOME}",
    "$HOME",
    "$1",
    "$@",
    "a;echo INJECTED",
    ". -maxdepth 0; echo INJECTED uid=$(id -u) #",
    "x' ; echo INJECTED ; '",
    "# comment",
    "*",
    "*.py",
    "?",
    "[a-z]",
    "~",
    "~root",
    "-n",
    "-e",
    "--",
    "-delete",
    "a\nb",
    "\n",
    "\t",
    "a\\b",
    "\\",
    "\\n",
    "!!",
    "a|b&c>d<e",
    "(x)",
    "{a,b}",
    "é",
    "💥",
    "日本語 テキスト",
    "\u200b",
    "a=b",
    "%s%d",
]
# text a process can take as an argument: no NUL, no unpaired surrogates
ARGUMENT_TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\0"), max_size=30)


def printed(shell: str, words: str) -> list[str]:
    """What `shell -c "printf '%s\\0' WORDS"` prints, one item per word."""
    done = subprocess.run(
        [shell, "-c", f"printf '%s\\0' {words}"], capture_output=True, timeout=30, check=True, env={}
    )
    return done.stdout.decode().split("\0")[:-1]


def quoted(value: Any, expression: str = "shell_quote(state.v)") -> Any:
    """`value` quoted by a template of the graph language."""
    return compile_template("${" + expression + "}", NS).render({"state": {"v": value}})


# -- the shell reads back exactly the value ------------------------------------------------


@pytest.mark.parametrize("shell", SHELLS)
def test_hostile_text_is_printed_as_written(shell: str) -> None:
    words = " ".join(quoted(text) for text in HOSTILE_TEXT)
    assert printed(shell, words) == HOSTILE_TEXT


@pytest.mark.parametrize("shell", SHELLS)
def test_the_cel_form_quotes_the_same(shell: str) -> None:
    cel = [quoted(text, "shell_quote(string(state.v))") for text in HOSTILE_TEXT]
    assert cel == [quoted(text) for text in HOSTILE_TEXT]
    assert printed(shell, " ".join(cel)) == HOSTILE_TEXT


@fuzz(60)
@given(texts=st.lists(ARGUMENT_TEXT | st.sampled_from(HOSTILE_TEXT), min_size=1, max_size=12))
def test_any_text_is_printed_as_written_by_sh(texts: list[str]) -> None:
    assert printed("/bin/sh", " ".join(quoted(t) for t in texts)) == texts


@fuzz(300)
@given(text=ARGUMENT_TEXT)
def test_any_text_is_one_word_that_splits_back_to_itself(text: str) -> None:
    assert shlex.split(shell_quote(text)) == [text]


@pytest.mark.parametrize("shell", SHELLS)
def test_a_list_is_one_word_per_item(shell: str) -> None:
    items = ["a b", "", "-x", "$(id)", 3, None, True, {"k": "v w"}]
    assert printed(shell, quoted(items)) == ["a b", "", "-x", "$(id)", "3", "", "true", '{"k":"v w"}']
    assert quoted([]) == ""  # no word at all
    assert printed(shell, f"a {quoted([])} b") == ["a", "b"]


@pytest.mark.parametrize(
    ("value", "word"),
    [
        (None, "''"),
        (True, "true"),
        (False, "false"),
        (0, "0"),
        (-12, "-12"),
        (2.5, "2.5"),
        ("plain", "plain"),
    ],
)
def test_scalars_are_converted_as_interpolation_converts_them(value: Any, word: str) -> None:
    assert quoted(value) == word
    assert shlex.split(quoted(value)) == [render_text(value)]


@fuzz(200)
@given(value=JSONISH)
def test_any_json_value_quotes_as_its_interpolated_text(value: Any) -> None:
    try:
        word = quoted(value)
    except ExpressionError as exc:
        assert "NUL" in str(exc) or "nested too deeply" in str(exc)
        return
    items = value if isinstance(value, list) else [value]
    assert shlex.split(word) == [render_text(v) for v in items]


@fuzz(150)
@given(value=FRIENDLY | HOSTILE)
def test_any_value_gives_a_word_or_an_expression_error(value: Any) -> None:
    for expression in ("shell_quote(state.v)", "shell_quote(state.v || 1)", "shell_quote(state.v.a)"):
        for form in (expression, expression.replace("(state", "(dyn(state")[:-1] + "))"):
            try:
                result = quoted(value, form)
            except ExpressionError as exc:
                assert str(exc)
            else:
                assert isinstance(result, str)


# -- where it works and how it fails --------------------------------------------------------


def test_a_path_chain_reads_as_interpolation_does() -> None:
    expr = compile_expression('shell_quote(inputs.dir || state.dir || "a dir")', NS)
    assert isinstance(expr, FunctionCall)
    assert expr.roots == {"inputs", "state"}
    assert expr.evaluate({"inputs": {}, "state": {"dir": "x y"}}) == "'x y'"
    assert expr.evaluate({"inputs": {}, "state": {}}) == "'a dir'"
    assert quoted(None, "shell_quote(state.missing.deeper)") == "''"  # a missing path is null


def test_only_programs_that_call_a_function_get_it() -> None:
    assert CelExpression("size(state.v) + 1", NS).functions == ()
    assert CelExpression("shell_quote(state.v) + 'x'", NS).functions == ("shell_quote",)
    assert quoted("a b", "state.v.shell_quote()") == "'a b'"  # CEL's receiver form
    assert quoted(["a", "b c"], "state.v.map(x, shell_quote(x))") == ["a", "'b c'"]  # type kept


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("shell_quote(state.v)", "got text with a NUL character"),
        ("shell_quote(string(state.v))", "got text with a NUL character"),
        ("shell_quote([state.v])", "got text with a NUL character"),
        ("shell_quote(state.v, 1)", "shell_quote() takes one value, got 2"),
        ("shell_quote()", "shell_quote() takes one value, got 0"),
    ],
)
def test_what_cannot_be_quoted_fails_the_expression_with_a_clear_message(
    expression: str, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG), pytest.raises(ExpressionError) as info:
        quoted("a\0b", expression)
    assert str(info.value).startswith(f"expression '{expression}' failed: ")
    assert message in str(info.value)
    assert caplog.records == []  # not logged by the CEL library on the way


def test_a_typo_is_an_evaluation_error_naming_the_function() -> None:
    with pytest.raises(ExpressionError, match="shell_qoute"):
        quoted("x", "shell_qoute(state.v)")


RYE = """\
version: "1.0.0"
tool_type: graph
config_schema:
  type: object
  properties:
    text: {type: string}
permissions: [rye.execute.tool.rye.bash.bash]
config:
  start: say
  nodes:
    say:
      action:
        primary: execute
        item_type: tool
        item_id: rye/bash/bash
        params: {command: "printf '%s' ${shell_quote(inputs.text)}"}
      assign: {said: "${result.stdout}"}
      next: done
    done: {type: return, output: {said: "${state.said}"}}
"""


@pytest.mark.parametrize("text", ["$(echo INJECTED)", "x'; echo INJECTED; '", "a\nb", "-n", ""])
def test_a_rye_graph_quotes_its_inputs_for_the_bash_tool(tmp_path: Path, text: str) -> None:
    path = tmp_path / "say.yaml"
    path.write_text(dedent(RYE))
    graph = load_graph(path, settings=Settings())
    assert (graph.spec.dialect, graph.report.warnings) == ("rye", [])
    result = graph.invoke_sync({"text": text}, capabilities=["*"])
    assert (result.status, result.output) == ("completed", {"said": text}), result.error


NATIVE = """\
id: say
inputs:
  text: {type: string}
  words: {type: list, default: []}
config: {start: say}
nodes:
  say:
    action:
      tool: shell
      params:
        shell: true
        command: "printf '<%s>' ${shell_quote(inputs.text)} ${shell_quote(inputs.words)}"
    assign: {said: "${result.stdout}"}
    next: done
  done: {type: return, output: "${state.said}"}
"""


@pytest.mark.parametrize("text", ["$(echo INJECTED)", "`echo INJECTED`", "it's; echo INJECTED #", "", "💥 *"])
def test_the_shell_tool_gets_each_value_as_one_word(tmp_path: Path, text: str) -> None:
    path = tmp_path / "say.yaml"
    path.write_text(NATIVE)
    graph = load_graph(path, settings=Settings())
    assert graph.report.warnings == []
    result = graph.invoke_sync({"text": text, "words": ["a b", "-n"]}, capabilities=["tool:shell"])
    assert (result.status, result.output) == ("completed", f"<{text}><a b><-n>"), result.error
