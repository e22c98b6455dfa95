"""Warnings for expressions certain to fail when they run (issue 12): `x / 0`, `x % 0`,
`[1, 2][5]`. Warnings, never errors: the graph stays valid and runnable."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from yaml_files import write

from graphrunner.cli import main
from graphrunner.expressions.lint import constant_problems
from graphrunner.loading import parse_graph
from graphrunner.settings import Settings

DIV = "constant_division_by_zero"
INDEX = "constant_index_out_of_range"


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        ("state.a / 0", [DIV]),
        ("state.a/0", [DIV]),
        ("state.a % 0", [DIV]),
        ("state.a / 0.0", [DIV]),
        ("state.a / 0.", [DIV]),
        ("state.a / .0", [DIV]),
        ("state.a / 00", [DIV]),
        ("state.a / -0", [DIV]),
        ("state.a / 0u", [DIV]),
        ("state.a / 0x0", [DIV]),
        ("(state.a / 0) + (state.b % 0)", [DIV, DIV]),
        ("state.a / 0 * 3", [DIV]),
        ("[1, 2][5]", [INDEX]),
        ("[1, 2][2]", [INDEX]),
        ("[][0]", [INDEX]),
        ("[1, 2][-1]", [INDEX]),
        ("[[1, 2, 3]][1]", [INDEX]),
        ("size([1, [2, 3], {'a': 1, 'b': 2}][3]) > 0", [INDEX]),
    ],
)
def test_certain_failures_are_found(text: str, codes: list[str]) -> None:
    assert [code for code, _ in constant_problems(text)] == codes


@pytest.mark.parametrize(
    "text",
    [
        "state.a / 0.5",
        "state.a / 0.05",
        "state.a / 10",
        "state.a / 0x10",
        "state.a / 01.5",
        "state.a / state.zero",
        'state.a + "0"',
        '"x / 0" + state.b',
        "'[1][5]' + state.b",
        "state.a / state.b0",
        "[1, 2][1]",
        "[1, 2,][1]",
        "state.l[5]",
        "state.l[1][5]",
        "f(x)[5]",
        "{'a': [1]}['a'][0]",
        "[1, 2][state.i]",
        "state.a / 1e0",
        "",
        "][[",
        "]]][0]",
    ],
)
def test_no_false_positives(text: str) -> None:
    assert constant_problems(text) == []


GRAPH = """
id: t
config:
  start: a
  hooks: [{event: after_step, when: 'state.n % 0 == 1', action: {tool: echo}}]
nodes:
  a:
    type: gate
    assign:
      ratio: "${state.n / 0}"
      third: "${[1, 2][2]}"
    next:
      - {to: done, when: "state.n / 0.0 > 1"}
      - to: done
  done:
    type: return
"""


def test_graph_warnings_name_node_site_and_line() -> None:
    graph = parse_graph(textwrap.dedent(GRAPH).lstrip(), file="g.yaml", settings=Settings())
    found = [
        (w.code, w.node, w.location, w.line) for w in graph.validate().warnings if w.code in (DIV, INDEX)
    ]
    assert found == [
        (DIV, None, "config.hooks.0.when", 4),
        (DIV, "a", "nodes.a.assign.ratio", 9),
        (INDEX, "a", "nodes.a.assign.third", 10),
        (DIV, "a", "nodes.a.next.0.when", 12),
    ]
    [ratio] = [w for w in graph.validate().warnings if (w.code, w.location) == (DIV, "nodes.a.assign.ratio")]
    assert ratio.message == "node 'a': assign.ratio: expression 'state.n / 0' divides by a constant zero"


def test_validate_prints_the_warning_and_exits_0(tmp_path: Path) -> None:
    path = write(tmp_path, "g.yaml", GRAPH)
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert "warning: " in result.stdout and "[constant_index_out_of_range]" in result.stdout
    assert "reads index 2 of a literal list of 2 item(s)" in result.stdout
    assert result.stdout.strip().endswith("valid (2 nodes, 5 warnings)")
