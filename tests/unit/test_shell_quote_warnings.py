"""`shell_interpolation` (issue 24): `validate` warns where a `${...}` is pasted into text that a
shell parses without `shell_quote`, says how to fix it, and is quiet once it is fixed."""

from __future__ import annotations

import json
from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest
from click.testing import CliRunner

from graphrunner.cli import main
from graphrunner.loading import inspect_graph
from graphrunner.report import Issue
from graphrunner.settings import Settings
from graphrunner.validation.shell_text import script_index

CODE = "shell_interpolation"
GRAPHS = Path(__file__).resolve().parents[2] / "graphs"


def warnings_of(tmp_path: Path, text: str, name: str = "graph.yaml") -> list[Issue]:
    path = tmp_path / name
    path.write_text(dedent(text), encoding="utf-8")
    graph, report = inspect_graph(path, settings=Settings())
    assert graph is not None, [i.render() for i in report.errors]
    return [w for w in report.warnings if w.code == CODE]


def shell_graph(params: str) -> str:
    return f"""\
        id: t
        inputs:
          dir: {{type: string, default: "."}}
          files: {{type: list, default: []}}
        config: {{start: run}}
        nodes:
          run:
            action:
              tool: shell
              params: {params}
            next: done
          done: {{type: return, output: "${{result.stdout}}"}}
        """


@pytest.mark.parametrize(
    "params",
    [
        '{command: "ls ${inputs.dir}", shell: true}',
        "{command: \"ls '${inputs.dir}'\", shell: true}",
        '{command: "ls \\"${inputs.dir}\\"", shell: true}',
        '{command: "ls ${inputs.dir || \\".\\"}", shell: true}',
        "{command: \"ls '${shell_quote(inputs.dir)}'\", shell: true}",
        '{command: "ls \\"${shell_quote(inputs.dir)}\\"", shell: true}',
        '{command: "ls ${shell_quote(inputs.dir) + inputs.dir}", shell: true}',
        '{command: "ls ${size(inputs.files)}", shell: true}',
        '{command: "${inputs.dir}", shell: true}',
        '{argv: [sh, -c, "ls ${inputs.dir}"]}',
        '{argv: [/bin/bash, -euc, "ls ${inputs.dir}"]}',
        '{argv: [bash, -o, pipefail, -c, "ls ${inputs.dir}"]}',
        '{argv: [/usr/bin/env, LC_ALL=C, sh, -c, "ls ${inputs.dir}"]}',
    ],
)
def test_an_unsafe_interpolation_into_shell_text_is_a_warning(tmp_path: Path, params: str) -> None:
    [warning] = warnings_of(tmp_path, shell_graph(params))
    assert (warning.node, warning.line) == ("run", 10)
    assert warning.location is not None and warning.location.startswith("nodes.run.action.params.")
    assert "shell_quote" in warning.message


@pytest.mark.parametrize(
    "params",
    [
        '{command: "ls ${shell_quote(inputs.dir)}", shell: true}',
        '{command: "ls -- ${shell_quote(inputs.files)} | wc -l", shell: true}',
        '{command: "ls ${ shell_quote( inputs.dir || \\".\\" ) }", shell: true}',
        '{command: "x=\\"$(ls ${shell_quote(inputs.dir)})\\"; echo \\"$x\\"", shell: true}',
        '{command: "echo \\"`ls ${shell_quote(inputs.dir)}` $((1 + (2)))\\" ${shell_quote(inputs.dir)}", shell: true}',
        "{command: \"echo '$${literal}' ${shell_quote(inputs.dir)}\", shell: true}",
        '{command: "${shell_quote(inputs.dir)}", shell: true}',
        '{command: "ls -la", shell: true}',
        '{argv: [ls, "${inputs.dir}", "-- ${inputs.dir}"]}',
        '{argv: [sh, -c, "ls \\"$1\\"", sh, "${inputs.dir}"]}',
        '{argv: [sh, -c, "ls ${shell_quote(inputs.dir)}"]}',
        '{argv: [sh, script.sh, "${inputs.dir}"]}',
        '{argv: [fish, -c, "ls"]}',
    ],
)
def test_quoted_or_shell_free_interpolations_are_not_warned_about(tmp_path: Path, params: str) -> None:
    assert warnings_of(tmp_path, shell_graph(params)) == []


def test_the_message_names_each_value_and_its_fix(tmp_path: Path) -> None:
    params = "{command: \"find ${inputs.dir} -name '${inputs.files}'\", shell: true}"
    [warning] = warnings_of(tmp_path, shell_graph(params))
    assert warning.message == (
        "node 'run': action.params.command: ${inputs.dir}, ${inputs.files} are pasted into text that a "
        "shell parses, so a value holding ';', '$(...)' or a quote would run commands of its own; "
        "write ${shell_quote(inputs.dir)}, ${shell_quote(inputs.files)} in their places, and drop the "
        "quotes written around ${inputs.files}"
    )


def test_quoting_inside_written_quotes_is_called_out(tmp_path: Path) -> None:
    [warning] = warnings_of(
        tmp_path, shell_graph("{command: \"ls '${shell_quote(inputs.dir)}'\", shell: true}")
    )
    assert "is written inside quotes, which undo shell_quote's own quoting" in warning.message


def test_a_whole_command_from_a_value_is_called_out(tmp_path: Path) -> None:
    [warning] = warnings_of(tmp_path, shell_graph('{command: "${inputs.dir}", shell: true}'))
    assert (
        "the whole command is ${inputs.dir}, so the shell runs whatever that value holds" in warning.message
    )


RYE = """\
tool_type: graph
config_schema:
  type: object
  properties:
    pattern: {type: string}
permissions: [rye.execute.tool.rye.bash.*, rye.execute.tool.echo]
config:
  start: count
  hooks:
    - event: graph_completed
      action:
        primary: execute
        item_id: rye/bash/bash
        params: {command: "echo ${status} >> /tmp/log"}
  nodes:
    count:
      action:
        primary: execute
        item_type: tool
        item_id: rye/bash/bash
        params:
          command: "find . -name '${inputs.pattern}' | wc -l"
      next: each
    each:
      node_type: foreach
      over: "${state.inputs.pattern}"
      action: {primary: execute, item_id: "tool:rye/bash", params: {command: "echo ${item}"}}
      next: done
    done: {node_type: return}
"""


def test_rye_bash_commands_in_nodes_foreach_and_hooks_are_located(tmp_path: Path) -> None:
    found = {(w.node, w.location, w.line) for w in warnings_of(tmp_path, RYE, "walk.yaml")}
    assert found == {
        (None, "config.hooks.0.action.params.command", 14),
        ("count", "config.nodes.count.action.params.command", 22),
        ("each", "config.nodes.each.action.params.command", 27),
    }


@pytest.mark.parametrize("name", ["count-files.yaml", "summary.yaml"])
def test_the_shipped_rye_examples_quote_every_value(name: str) -> None:
    graph, report = inspect_graph(GRAPHS / "rye" / name)
    assert graph is not None and [w for w in report.warnings if w.code == CODE] == []
    assert "shell_quote(" in (GRAPHS / "rye" / name).read_text()


def test_validate_json_lists_the_warning_with_where_it_is(tmp_path: Path) -> None:
    path = tmp_path / "graph.yaml"
    path.write_text(dedent(shell_graph('{command: "ls ${inputs.dir}", shell: true}')), encoding="utf-8")
    text = CliRunner().invoke(main, ["validate", str(path)])
    assert text.exit_code == 0, text.output
    assert (
        f"warning: {path}:10: [{CODE}] node 'run': action.params.command: ${{inputs.dir}} is" in text.stdout
    )
    result = CliRunner().invoke(main, ["validate", str(path), "--json"])
    report = json.loads(result.stdout)
    assert report["valid"] is True
    [warning] = report["warnings"]
    expected = {"code": CODE, "node": "run", "location": "nodes.run.action.params.command", "line": 10}
    assert {k: warning[k] for k in expected} == expected
    assert warning["file"] == str(path) and "${shell_quote(inputs.dir)}" in warning["message"]


@pytest.mark.parametrize(
    ("argv", "index"),
    [
        (["sh", "-c", "x"], 2),
        (["/bin/sh", "-ec", "x", "arg0"], 2),
        (["bash", "-o", "pipefail", "-c", "x"], 4),
        (["bash", "--norc", "-c", "x"], 3),
        (["env", "A=1", "dash", "-c", "x"], 4),
        (["sh", "-c"], None),
        (["sh", "script.sh", "-c"], None),
        (["sh", "--", "-c", "x"], None),
        (["python", "-c", "x"], None),
        (["${inputs.shell}", "-c", "x"], None),
        ([], None),
        ([1, "-c", "x"], None),
    ],
)
def test_the_script_of_a_shell_argv(argv: list[Any], index: int | None) -> None:
    assert script_index(argv) == index
