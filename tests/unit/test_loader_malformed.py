"""Malformed graphs that once crashed the loader (issue 12): each is a located
`GraphValidationError`, and `validate` reports it next to the good graphs, exit 1.

`pytest.raises(GraphValidationError)` lets any other exception fail the test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from yaml_files import assert_no_traceback, write

from graphrunner.cli import main
from graphrunner.errors import GraphValidationError
from graphrunner.loading import load_graph, parse_graph
from graphrunner.settings import Settings

VALID = """\
id: t
state: {s: {type: list, default: []}}
config: {start: a}
nodes:
  a: {type: gate, assign: {s: [1]}, next: done}
  done: {type: return}
"""

CASES = {
    "reducer-list-of-a-float": (
        "state: {s: {type: list, default: []}}",
        "state: {s: {type: list, reducer: [1.5]}}",
    ),
    "branches-a-float": ("next: done}", "next: {type: conditional, branches: 1.5}}"),
    "branches-a-string": ("next: done}", "next: {type: conditional, branches: done}}"),
    "superscript-node-name": ("  done: {type: return}", '  done: {type: return}\n  "²": {type: return}'),
    "huge-integer": ("config: {start: a}", "config: {start: a, max_steps: " + "9" * 4400 + "}"),
    "huge-negative-integer": ("config: {start: a}", "config: {start: a, max_steps: -" + "9" * 4400 + "}"),
    "bracket-in-unknown-key": ("id: t", "id: t\nx[y: 1"),
    "lone-surrogate-escape": ("config: {start: a}", 'config: {start: "a\\ud800"}'),
    "lone-surrogate-key": ("  done: {type: return}", '  done: {type: return}\n  "\\udc00": {type: return}'),
}


def malformed(case: str) -> str:
    old, new = CASES[case]
    assert old in VALID
    return VALID.replace(old, new, 1)


def test_the_valid_graph_loads() -> None:
    parse_graph(VALID, settings=Settings())


@pytest.mark.parametrize("case", list(CASES))
def test_malformed_graph_is_a_located_validation_error(case: str) -> None:
    with pytest.raises(GraphValidationError) as info:
        parse_graph(malformed(case), file="g.yaml", settings=Settings())
    assert info.value.issues
    for issue in info.value.issues:
        assert issue.code in ("invalid_schema", "invalid_yaml"), issue
        assert issue.file == "g.yaml" and issue.line is not None, issue


def test_reducer_list_names_the_field() -> None:
    with pytest.raises(GraphValidationError) as info:
        parse_graph(malformed("reducer-list-of-a-float"), settings=Settings())
    [issue] = info.value.issues
    assert issue.location == "state.s.reducer" and "1.5" in issue.message


def test_branches_not_a_list_names_the_node() -> None:
    with pytest.raises(GraphValidationError) as info:
        parse_graph(malformed("branches-a-float"), settings=Settings())
    [issue] = info.value.issues
    assert issue.node == "a" and "branches" in issue.message


def test_superscript_node_name_is_a_bad_name() -> None:
    with pytest.raises(GraphValidationError) as info:
        parse_graph(malformed("superscript-node-name"), file="g.yaml", settings=Settings())
    [issue] = info.value.issues
    assert "node name '²' must match" in issue.message and issue.line == 7


def test_huge_integer_says_what_is_wrong() -> None:
    with pytest.raises(GraphValidationError) as info:
        parse_graph(malformed("huge-integer"), file="g.yaml", settings=Settings())
    [issue] = info.value.issues
    assert issue.code == "invalid_yaml" and issue.line == 3
    assert "integer of more than 4300 digits" in issue.message


def test_unknown_key_with_a_bracket() -> None:
    with pytest.raises(GraphValidationError) as info:
        parse_graph(malformed("bracket-in-unknown-key"), file="g.yaml", settings=Settings())
    [issue] = info.value.issues
    assert "unknown key 'x[y'" in issue.message and issue.line == 2


def test_surrogate_pair_escapes_are_joined() -> None:
    graph = parse_graph(VALID.replace("id: t", 'id: "t-\\ud83d\\udca5"'), settings=Settings())
    assert graph.id == "t-\U0001f4a5"


def test_lone_surrogate_escape_is_not_valid_unicode() -> None:
    with pytest.raises(GraphValidationError) as info:
        parse_graph(malformed("lone-surrogate-escape"), file="g.yaml", settings=Settings())
    [issue] = info.value.issues
    assert issue.code == "invalid_yaml" and issue.line == 3
    assert "unpaired surrogate" in issue.message and "\\ud800" in issue.message


def test_validate_reports_every_file_and_exits_1(tmp_path: Path) -> None:
    good = write(tmp_path, "good.yaml", VALID)
    bad = [write(tmp_path, f"{case}.yaml", malformed(case)) for case in CASES]
    result = CliRunner().invoke(main, ["validate", "--json", str(good), *map(str, bad)])
    assert_no_traceback(result)
    assert result.exit_code == 1, result.output
    reports = json.loads(result.stdout)
    assert [r["valid"] for r in reports] == [True] + [False] * len(CASES)


def test_load_graph_from_a_file(tmp_path: Path) -> None:
    path = write(tmp_path, "g.yaml", malformed("superscript-node-name"))
    with pytest.raises(GraphValidationError, match=str(path)):
        load_graph(path, settings=Settings())


@pytest.mark.parametrize(
    "output",
    [
        "{1: a, b: c}",
        "{null: a, b: c}",
        "{!!binary aGk=: a, b: c}",
        "{1.5: [a], true: b, x: 1}",
        "!!set {a, b}",
    ],
)
def test_values_with_keys_of_mixed_types_load(output: str) -> None:
    text = VALID.replace("  done: {type: return}", f"  done: {{type: return, output: {output}}}")
    graph = parse_graph(text, settings=Settings())
    assert len(graph.content_hash) == 64


def test_the_content_hash_of_a_set_does_not_depend_on_hash_seeds(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = write(
        tmp_path,
        "g.yaml",
        VALID.replace("  done: {type: return}", "  done: {type: return, output: !!set {a, b, c, d}}"),
    )
    code = f"from graphrunner import load_graph; print(load_graph({str(path)!r}).content_hash)"
    hashes = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(hashes) == 1


@pytest.mark.parametrize(
    ("replace", "code"),
    [
        ("state: {s: {type: list, default: []}}", "reducer_configuration_invalid"),
        ("a: {type: gate, assign: {s: [1]}, next: done}", "invalid_schema"),
    ],
)
def test_a_module_that_fails_to_import_is_reported(replace: str, code: str) -> None:
    ref = "import_raises_targets:fn"
    new = (
        f"state: {{s: {{type: list, default: [], reducer: '{ref}'}}}}"
        if code == "reducer_configuration_invalid"
        else f"a: {{type: gate, assign: {{s: [1]}}, next: {{fn: '{ref}'}}}}"
    )
    with pytest.raises(GraphValidationError) as info:
        parse_graph(VALID.replace(replace, new), file="g.yaml", settings=Settings())
    [issue] = [i for i in info.value.issues if i.code == code]
    assert "RuntimeError: this module refuses to be imported" in issue.message


def test_files_without_an_id_are_different_graphs_under_different_names(tmp_path: Path) -> None:
    text = VALID.replace("id: t\n", "")
    assert "id:" not in text
    first, second = write(tmp_path, "first.yaml", text), write(tmp_path, "second.yaml", text)
    graphs = [load_graph(p, settings=Settings()) for p in (first, second, first)]
    assert [g.id for g in graphs] == ["first", "second", "first"]
    assert graphs[0].content_hash != graphs[1].content_hash  # stored apart: each keeps its id
    assert graphs[0].content_hash == graphs[2].content_hash
