"""`-i KEY=VALUE` is converted to the declared type of the input (issue 18): a string input
takes the text as written, an integer, number or boolean input reads it as that type, any other
input (or one not declared) takes JSON when the text parses; `--inputs` takes JSON as it is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from yaml_files import assert_no_traceback, write

from graphrunner.cli import main
from graphrunner.cli.common import coerce_input

TYPED = """
id: typed
inputs:
  name: {type: string, default: world}
  count: {type: integer, default: 1}
  ratio: {type: number, default: 0.5}
  flag: {type: boolean, default: false}
  tags: {type: list, default: []}
  extra: any
config: {start: done}
nodes:
  done:
    type: return
    output:
      name: "${inputs.name}"
      count: "${inputs.count}"
      ratio: "${inputs.ratio}"
      flag: "${inputs.flag}"
      tags: "${inputs.tags}"
      extra: "${inputs.extra}"
"""


@pytest.mark.parametrize(
    ("declared", "text", "value"),
    [
        ("string", "42", "42"),
        ("string", "true", "true"),
        ("string", "null", "null"),
        ("string", '"quoted"', '"quoted"'),
        ("string", " padded ", " padded "),
        ("string", "", ""),
        ("integer", "42", 42),
        ("integer", "-7", -7),
        ("integer", "+7", 7),
        ("integer", " 8 ", 8),
        ("number", "3", 3),
        ("number", "0.25", 0.25),
        ("number", "-.5", -0.5),
        ("number", "1e-3", 0.001),
        ("number", "2.", 2.0),
        ("boolean", "true", True),
        ("boolean", "FALSE", False),
        ("boolean", "True", True),
        ("list", "[1, 2]", [1, 2]),
        ("object", '{"a": 1}', {"a": 1}),
        ("any", "3", 3),
        ("any", "text", "text"),
        (None, "3", 3),
        (None, "null", None),
        (None, "Ada", "Ada"),
    ],
)
def test_a_value_becomes_its_declared_type(declared: str | None, text: str, value: Any) -> None:
    got = coerce_input("x", text, declared)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(
    ("declared", "text", "expected"),
    [
        ("integer", "abc", "an integer"),
        ("integer", "7.5", "an integer"),
        ("integer", "1e3", "an integer"),
        ("integer", "0x10", "an integer"),
        ("integer", "1_000", "an integer"),
        ("integer", "", "an integer"),
        ("integer", "true", "an integer"),
        ("integer", "9" * 5000, "an integer"),
        ("number", "nan", "a finite number"),
        ("number", "inf", "a finite number"),
        ("number", "1e999", "a finite number"),
        ("number", "1,5", "a finite number"),
        ("boolean", "yes", "true or false"),
        ("boolean", "1", "true or false"),
        ("boolean", "", "true or false"),
    ],
)
def test_a_value_that_is_not_its_type_names_the_input_and_the_type(
    declared: str, text: str, expected: str
) -> None:
    with pytest.raises(ValueError) as caught:
        coerce_input("x", text, declared)
    assert str(caught.value).startswith(f"input 'x' is declared {declared}, and ")
    assert str(caught.value).endswith(f" is not {expected}")


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["run", "--in-process", *args], env={"GRAPHRUNNER_QUIET": "1"})


def test_run_converts_every_input_to_its_type(tmp_path: Path) -> None:
    path = str(write(tmp_path, "typed.yaml", TYPED))
    pairs = ["name=42", "count=7", "ratio=1e-3", "flag=true", 'tags=["a", 2]', "extra=null"]
    result = run(path, *(arg for pair in pairs for arg in ("-i", pair)), "--json")
    assert result.exit_code == 0, result.stderr
    output = json.loads(result.stdout)["output"]
    assert output == {"name": "42", "count": 7, "ratio": 0.001, "flag": True, "tags": ["a", 2], "extra": None}


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ("count=abc", "input 'count' is declared integer, and 'abc' is not an integer"),
        ("ratio=fast", "input 'ratio' is declared number, and 'fast' is not a finite number"),
        ("flag=yes", "input 'flag' is declared boolean, and 'yes' is not true or false"),
    ],
)
def test_a_bad_value_is_a_usage_error_naming_the_input_and_type(
    tmp_path: Path, pair: str, message: str
) -> None:
    result = run(str(write(tmp_path, "typed.yaml", TYPED)), "-i", pair, "--json")
    assert result.exit_code == 2
    assert "'-i' / '--input'" in result.stderr and message in result.stderr
    assert result.stdout == ""
    assert_no_traceback(result)


def test_a_list_input_still_takes_json_and_the_schema_refuses_text(tmp_path: Path) -> None:
    result = run(str(write(tmp_path, "typed.yaml", TYPED)), "-i", "tags=abc")
    assert result.exit_code == 2
    assert "'tags' must be list, got str 'abc'" in result.stderr


def test_inputs_json_is_taken_as_it_is(tmp_path: Path) -> None:
    path = str(write(tmp_path, "typed.yaml", TYPED))
    refused = run(path, "--inputs", '{"name": 42}')
    assert refused.exit_code == 2 and "'name' must be string, got int 42" in refused.stderr
    typed = run(path, "--inputs", '{"name": "Ada", "count": 3}', "-i", "count=4", "--json")
    assert typed.exit_code == 0, typed.stderr
    output = json.loads(typed.stdout)["output"]
    assert (output["name"], output["count"]) == ("Ada", 4)  # -i wins over --inputs


def test_an_input_the_graph_does_not_declare_keeps_json_parsing(tmp_path: Path) -> None:
    text = "id: free\nconfig: {start: done}\nnodes:\n  done: {type: return, output: '${inputs}'}\n"
    result = run(str(write(tmp_path, "free.yaml", text)), "-i", "n=3", "-i", "s=hi", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["output"] == {"n": 3, "s": "hi"}


def test_step_converts_inputs_the_same_way(tmp_path: Path) -> None:
    path = str(write(tmp_path, "typed.yaml", TYPED))
    env = {"GRAPHRUNNER_QUIET": "1"}
    result = CliRunner().invoke(
        main, ["step", path, "--node", "done", "-i", "name=007", "--json"], env=env
    )  # int 7 before
    assert result.exit_code == 0, result.stderr
    bad = CliRunner().invoke(main, ["step", path, "--node", "done", "-i", "count=x"], env=env)
    assert bad.exit_code == 2 and "input 'count' is declared integer" in bad.stderr


@pytest.mark.parametrize("command", ["run", "submit", "step"])
def test_help_says_how_values_are_read(command: str) -> None:
    text = " ".join(CliRunner().invoke(main, [command, "--help"]).stdout.split())
    assert "converted to its declared type" in text
    assert "-i name=42 is the text '42'" in text
    assert "its values are taken as they are" in text
