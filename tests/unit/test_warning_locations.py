"""Every warning, and the errors about routing, is reported on the line that causes it (issue 18):
a state field read but never written where it is read, a field never read where it is declared
or written, an expression in any form of `next` on its own line, never the graph's first lines.

Each case marks its line with `# <-`; every issue of the case's code must be on that line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from textwrap import dedent

import pytest
from click.testing import CliRunner

from graphrunner.cli import main
from graphrunner.loading import inspect_graph
from graphrunner.report import Issue, ValidationReport
from graphrunner.settings import Settings

MARK = "# <-"

CHILD = """\
id: team/child
inputs:
  q: {type: string}
state:
  answer: {type: string}
config: {start: finish}
nodes:
  finish:
    type: return
"""


@dataclass(frozen=True)
class Case:
    id: str
    code: str
    text: str
    node: str | None = None
    check_env: bool = False

    @property
    def line(self) -> int:
        lines = [i for i, text in enumerate(dedent(self.text).splitlines(), 1) if MARK in text]
        assert len(lines) == 1, f"{self.id}: mark exactly one line"
        return lines[0]


def report_of(tmp_path: Path, text: str, check_env: bool = False) -> tuple[ValidationReport, Path]:
    (tmp_path / "child.yaml").write_text(CHILD, encoding="utf-8")
    path = tmp_path / "graph.yaml"
    path.write_text(dedent(text), encoding="utf-8")
    return inspect_graph(path, settings=Settings(), check_env=check_env)[1], path


def issues_of(report: ValidationReport, code: str) -> list[Issue]:
    return [i for i in [*report.errors, *report.warnings] if i.code == code]


NEVER_ASSIGNED = "state_never_assigned"
NEVER_READ = "state_never_read"

WARNINGS = [
    Case(
        "read-in-params",
        NEVER_ASSIGNED,
        """
        id: t
        state:
          result: {type: string}
        config: {start: a}
        nodes:
          a:
            action:
              tool: echo
              params:
                text: hi
                other: "${state.missing}"  # <-
            assign: {result: "${result.text}"}
            next: done
          done: {type: return, output: {r: "${state.result}"}}
        """,
        node="a",
    ),
    Case(
        "read-in-a-branch-condition",
        NEVER_ASSIGNED,
        """
        id: t
        config: {start: a}
        nodes:
          a:
            type: gate
            next:
              - to: done
                when: "state.cond == 1"  # <-
              - to: done
          done: {type: return}
        """,
        node="a",
    ),
    Case(
        "read-in-a-conditional-mapping",
        NEVER_ASSIGNED,
        """
        id: t
        config: {start: a}
        nodes:
          a:
            type: gate
            next:
              type: conditional
              branches:
                - {to: done, when: "true"}
                - {to: done, when: "state.cond == 1"}  # <-
              default: done
          done: {type: return}
        """,
        node="a",
    ),
    Case(
        "read-as-a-condition-path",
        NEVER_ASSIGNED,
        """
        id: t
        config: {start: a}
        nodes:
          a:
            type: gate
            next:
              - to: done
                when: {path: state.flag, op: truthy}  # <-
              - to: done
          done: {type: return}
        """,
        node="a",
    ),
    Case(
        "read-in-a-hook",
        NEVER_ASSIGNED,
        """
        id: t
        config:
          start: done
          hooks:
            - event: after_step
              when: "state.tally > 3"  # <-
              action: {tool: echo}
        nodes:
          done: {type: return}
        """,
    ),
    Case(
        "read-by-a-childs-input",
        NEVER_ASSIGNED,
        """
        id: t
        state:
          answer: {type: string}
        config: {start: ask}
        nodes:
          ask:
            type: subgraph
            graph: team/child
            inputs:
              q: question  # <-
            outputs: {answer: answer}
            next: done
          done: {type: return, output: "${state.answer}"}
        """,
        node="ask",
    ),
    Case(
        "read-in-the-output",
        NEVER_ASSIGNED,
        """
        id: t
        config: {start: done}
        nodes:
          done:
            type: return
            output:
              r: "${state.nowhere}"  # <-
        """,
        node="done",
    ),
    Case(
        "declared-never-read",
        NEVER_READ,
        """
        id: t
        state:
          kept: {type: integer, default: 0}
          unused: {type: integer}  # <-
        config: {start: a}
        nodes:
          a: {type: gate, assign: {kept: 1}, next: done}
          done: {type: return, output: "${state.kept}"}
        """,
    ),
    Case(
        "assigned-never-read",
        NEVER_READ,
        """
        id: t
        state:
          kept: {type: integer, default: 0}
        config: {start: a}
        nodes:
          a:
            type: gate
            assign:
              kept: 1
              scratch: 2  # <-
            next: done
          done: {type: return, output: "${state.kept}"}
        """,
        node="a",
    ),
    Case(
        "result-key-never-read",
        NEVER_READ,
        """
        id: t
        config: {start: a}
        nodes:
          a:
            action: {tool: echo}
            result_key: raw  # <-
            next: done
          done: {type: return, output: "fixed"}
        """,
        node="a",
    ),
    Case(
        "no-return-node",
        "no_return_node",
        """
        id: t
        config: {start: a}
        nodes:  # <-
          a: {action: {tool: echo}}
        """,
    ),
    Case(
        "env-of-a-node",
        "env_missing",
        """
        id: t
        config: {start: a}
        nodes:
          a:
            action: {tool: echo}
            env_requires:
              - GRAPHRUNNER_TEST_SURELY_UNSET_VARIABLE  # <-
            next: done
          done: {type: return}
        """,
        node="a",
        check_env=True,
    ),
    Case(
        "env-of-the-graph",
        "env_missing",
        """
        id: t
        config:
          start: done
          env_requires:
            - HOME
            - GRAPHRUNNER_TEST_SURELY_UNSET_VARIABLE  # <-
        nodes:
          done: {type: return}
        """,
        check_env=True,
    ),
    Case(
        "constant-in-a-conditional-mapping",
        "constant_division_by_zero",
        """
        id: t
        config: {start: a}
        nodes:
          a:
            type: gate
            next:
              type: conditional
              branches:
                - to: done
                  when: "1 / 0 > 1"  # <-
              default: done
          done: {type: return}
        """,
        node="a",
    ),
    Case(
        "unreachable-in-a-rye-file",
        "unreachable_node",
        """
        tool_type: graph
        config:
          start: first
          nodes:
            first: {action: {primary: execute, item_id: echo}, next: done}
            stray: {action: {primary: execute, item_id: echo}, next: done}  # <-
            done: {type: return}
        """,
        node="stray",
    ),
    Case(
        "shell-text-in-a-hook",
        "shell_interpolation",
        """
        id: t
        config:
          start: done
          hooks:
            - event: graph_completed
              action:
                tool: shell
                params:
                  shell: true
                  command: "echo ${event.status} >> log"  # <-
        nodes:
          done: {type: return}
        """,
    ),
    Case(
        "shell-text-in-a-rye-file",
        "shell_interpolation",
        """
        tool_type: graph
        config:
          start: first
          nodes:
            first:
              action:
                primary: execute
                item_id: rye/bash/bash
                params:
                  working_dir: "${inputs.dir}"
                  command: "ls '${inputs.dir}'"  # <-
              next: done
            done: {type: return}
        """,
        node="first",
    ),
    Case(
        "read-in-a-rye-file",
        NEVER_ASSIGNED,
        """
        tool_type: graph
        config:
          start: first
          nodes:
            first:
              action:
                primary: execute
                item_id: echo
                params: {value: "${state.never_written}"}  # <-
              next: done
            done: {type: return}
        """,
        node="first",
    ),
]

ERRORS = [
    Case(
        "dangling-branch-of-a-conditional-mapping",
        "dangling_edge",
        """
        id: t
        config: {start: a}
        nodes:
          a:
            type: gate
            next:
              type: conditional
              branches:
                - {to: done, when: "true"}
                - {to: nowhere, when: "false"}  # <-
              default: done
          done: {type: return}
        """,
        node="a",
    ),
    Case(
        "dangling-default-of-a-conditional-mapping",
        "dangling_edge",
        """
        id: t
        config: {start: a}
        nodes:
          a:
            type: gate
            next:
              type: conditional
              branches:
                - {to: done, when: "true"}
              default: nowhere  # <-
          done: {type: return}
        """,
        node="a",
    ),
    Case(
        "dangling-unconditional-mapping",
        "dangling_edge",
        """
        id: t
        config: {start: a}
        nodes:
          a:
            type: gate
            next:
              type: unconditional
              to: nowhere  # <-
          done: {type: return}
        """,
        node="a",
    ),
    Case(
        "bad-expression-in-a-conditional-mapping",
        "bad_expression",
        """
        id: t
        config: {start: a}
        nodes:
          a:
            type: gate
            next:
              type: conditional
              branches:
                - to: done
                  when: "(("  # <-
              default: done
          done: {type: return}
        """,
        node="a",
    ),
]


@pytest.mark.parametrize("case", [*WARNINGS, *ERRORS], ids=lambda c: c.id)
def test_the_issue_is_on_the_line_that_causes_it(tmp_path: Path, case: Case) -> None:
    report, path = report_of(tmp_path, case.text, case.check_env)
    found = issues_of(report, case.code)
    assert found, f"expected {case.code}, got {report.errors + report.warnings}"
    assert [(i.line, i.file) for i in found] == [(case.line, str(path))] * len(found), found
    assert {i.node for i in found} == {case.node}
    wanted = report.warnings if case in WARNINGS else report.errors
    assert all(i in wanted for i in found)


def test_a_field_read_in_several_places_is_reported_once_where_it_is_first_read(tmp_path: Path) -> None:
    text = """
    id: t
    config: {start: a}
    nodes:
      a:
        action: {tool: echo, params: {v: "${state.x}"}}  # <-
        next: b
      b:
        action: {tool: echo, params: {v: "${state.x}"}}
        next: done
      done: {type: return, output: "${state.x}"}
    """
    report, _ = report_of(tmp_path, text)
    [warning] = issues_of(report, NEVER_ASSIGNED)
    assert (warning.line, warning.node, warning.location) == (6, "a", "nodes.a.action.params.v")
    assert warning.message == (
        "node 'a': action.params.v: state.x is read but no node writes it and it is not declared"
    )


def test_validate_prints_the_line_of_the_use(tmp_path: Path) -> None:
    case = WARNINGS[0]
    _, path = report_of(tmp_path, case.text)
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert (
        f"warning: {path}:{case.line}: [state_never_assigned] node 'a': action.params.other: "
        in result.stdout
    )
    json_result = CliRunner().invoke(main, ["validate", str(path), "--json"])
    [warning] = json.loads(json_result.stdout)["warnings"]
    assert (warning["line"], warning["location"]) == (case.line, "nodes.a.action.params.other")
