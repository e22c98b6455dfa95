"""Every validation error code and warning of DESIGN §2.6, the Rye-compatible forms, the
YAML 1.2 reading rules and the content hash.

Each error case is a graph that triggers the code (the line marked `# <-` is where the
issue must be reported) and a closely similar graph, made by one textual change, that
does not.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import route_targets

from graphrunner.errors import GraphValidationError
from graphrunner.graph import Graph
from graphrunner.loading import content_hash, inspect_graph, load_graph, parse_graph
from graphrunner.loading.yaml_source import parse_yaml
from graphrunner.model import ActionNode, GateNode, RetryPolicy, ReturnNode
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


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def write(tmp_path: Path, text: str, name: str = "graph.yaml") -> Path:
    path = tmp_path / name
    path.write_text(dedent(text), encoding="utf-8")
    return path


def inspect(
    tmp_path: Path, text: str, *, check_env: bool = False, name: str = "graph.yaml"
) -> tuple[Graph | None, ValidationReport, Path]:
    path = write(tmp_path, text, name)
    graph, report = inspect_graph(path, settings=Settings(), check_env=check_env)
    return graph, report, path


def marked_line(text: str) -> int:
    """The 1-based line of the one line carrying the `# <-` marker."""
    lines = [i for i, line in enumerate(dedent(text).splitlines(), start=1) if MARK in line]
    assert len(lines) == 1, "a case marks exactly one line"
    return lines[0]


def codes(issues: list[Issue]) -> set[str]:
    return {i.code for i in issues}


@dataclass(frozen=True)
class Case:
    """`bad` triggers `code` on the marked line; `bad` with `old` replaced by `new` does not."""

    id: str
    code: str
    node: str | None
    bad: str
    old: str
    new: str

    def good(self) -> str:
        bad = dedent(self.bad)
        assert self.old in bad
        return bad.replace(self.old, self.new)


SUBGRAPH_PARENT = """
id: parent
state:
  question: {type: string}
  reply: {type: string}
config: {start: ask}
nodes:
  ask:
    type: subgraph
    graph: team/child
    inputs:
      INPUT
    outputs:
      OUTPUT
    next: done
  done:
    type: return
"""


def subgraph_parent(inputs: str, outputs: str) -> str:
    return SUBGRAPH_PARENT.replace("INPUT", inputs).replace("OUTPUT", outputs)


FOREACH = """
id: t
state:
  pages: {type: list, default: [], reducer: append}
config: {start: each}
nodes:
  each:
    type: foreach
    over: OVER
    as: AS
    parallel: false
    CONCURRENCY
    action: {tool: echo, params: {u: "${url}"}}
    collect: pages
    next: done
  done:
    type: return
    output: {pages: "${state.pages}"}
"""


def foreach(over: str = "[1, 2]", as_: str = "url", concurrency: str = "tolerated_failures: 0") -> str:
    return FOREACH.replace("OVER", over).replace("AS", as_).replace("CONCURRENCY", concurrency)


ASSIGN_N = """
id: t
state:
  n: {type: integer, default: 0}
config: {start: a}
nodes:
  a:
    action:
      tool: echo
      params: {v: PARAM}PMARK
    assign:
      n: ASSIGNAMARK
    next:
      - to: done
        when: WHENWMARK
      - to: done
  done:
    type: return
    output: {n: "${state.n}"}
"""


def assign_n(
    param: str = '"${state.n}"', assign: str = '"${state.n + 1}"', when: str = '"result.ok"', mark: str = ""
) -> str:
    """The graph above; `mark` (param, assign or when) puts the `# <-` marker on that line."""
    text = ASSIGN_N.replace("PARAM", param).replace("ASSIGN", assign).replace("WHEN", when)
    for name, token in (("param", "PMARK"), ("assign", "AMARK"), ("when", "WMARK")):
        text = text.replace(token, f"  {MARK}" if name == mark else "")
    return text


ERROR_CASES = [
    Case(
        "no_declared_entry",
        "no_declared_entry",
        None,
        """
        id: t
        config:  # <-
          max_steps: 10
        nodes:
          done:
            type: return
        """,
        "max_steps: 10",
        "start: done",
    ),
    Case(
        "unreachable_node",
        "unreachable_node",
        "recover",
        """
        id: t
        config: {start: a}
        nodes:
          a:
            action: {tool: echo}
            next: done
          recover:  # <-
            type: return
          done:
            type: return
        """,
        "next: done",
        "on_error: recover\n    next: done",
    ),
    Case(
        "dangling_edge-next",
        "dangling_edge",
        "a",
        """
        id: t
        config: {start: a}
        nodes:
          a:
            action: {tool: echo}
            next: dnoe  # <-
          done:
            type: return
        """,
        "next: dnoe",
        "next: done",
    ),
    Case(
        "dangling_edge-on_error",
        "dangling_edge",
        "a",
        """
        id: t
        config: {start: a}
        nodes:
          a:
            action: {tool: echo}
            on_error: recovr  # <-
            next: done
          recover:
            type: return
          done:
            type: return
        """,
        "on_error: recovr",
        "on_error: recover",
    ),
    Case(
        "dangling_edge-start",
        "dangling_edge",
        None,
        """
        id: t
        config:
          start: begn  # <-
        nodes:
          begin:
            type: return
        """,
        "start: begn",
        "start: begin",
    ),
    Case(
        "multiple_outgoing_edges",
        "multiple_outgoing_edges",
        "a",
        """
        id: t
        config: {start: a}
        nodes:
          a:
            action: {tool: echo}
            next:  # <-
              - to: b
              - to: c
          b:
            type: return
          c:
            type: return
        """,
        "- to: b\n",
        '- to: b\n        when: "inputs.fast == true"\n',
    ),
    Case(
        "conflicting_reducers",
        "conflicting_reducers",
        None,
        """
        id: t
        state:
          items:
            type: list
            default: []
            reducer: [append, merge]  # <-
        config: {start: done}
        nodes:
          done:
            type: return
        """,
        "[append, merge]",
        "append",
    ),
    Case(
        "mapping-inputs-child-field",
        "mapping_references_undeclared_field",
        "ask",
        subgraph_parent("nope: question  # <-", "reply: answer"),
        "nope: question",
        "q: question",
    ),
    Case(
        "mapping-inputs-parent-field",
        "mapping_references_undeclared_field",
        "ask",
        subgraph_parent("q: missing  # <-", "reply: answer"),
        "q: missing",
        "q: question",
    ),
    Case(
        "mapping-outputs-parent-field",
        "mapping_references_undeclared_field",
        "ask",
        subgraph_parent("q: question", "ghost: answer  # <-"),
        "ghost: answer",
        "reply: answer",
    ),
    Case(
        "mapping-outputs-child-field",
        "mapping_references_undeclared_field",
        "ask",
        subgraph_parent("q: question", "reply: nothere  # <-"),
        "reply: nothere",
        "reply: answer",
    ),
    Case(
        "reducer-bounded_append-max_len-0",
        "reducer_configuration_invalid",
        None,
        """
        id: t
        state:
          log:
            type: list
            reducer: {name: bounded_append, max_len: 0}  # <-
        config: {start: done}
        nodes:
          done:
            type: return
        """,
        "max_len: 0",
        "max_len: 5",
    ),
    Case(
        "reducer-merge_by_key-without-key",
        "reducer_configuration_invalid",
        None,
        """
        id: t
        state:
          records:
            type: list
            reducer: {name: merge_by_key}  # <-
        config: {start: done}
        nodes:
          done:
            type: return
        """,
        "{name: merge_by_key}",
        "{name: merge_by_key, key: id}",
    ),
    Case(
        "duplicate_key-in-node",
        "duplicate_key",
        "a",
        """
        id: t
        config: {start: a}
        nodes:
          a:
            action: {tool: echo}
            next: done
            next: done  # <-
          done:
            type: return
        """,
        "    next: done  # <-\n",
        "",
    ),
    Case(
        "duplicate_key-top-level",
        "duplicate_key",
        None,
        """
        id: t
        description: first
        config: {start: done}
        description: second  # <-
        nodes:
          done:
            type: return
        """,
        "description: second",
        "version: second",
    ),
    Case(
        "unknown_tool",
        "unknown_tool",
        "a",
        """
        id: t
        config: {start: a}
        nodes:
          a:
            action:
              tool: ehco  # <-
            next: done
          done:
            type: return
        """,
        "tool: ehco",
        "tool: echo",
    ),
    Case(
        "bad_expression-cel-syntax",
        "bad_expression",
        "a",
        assign_n(assign='"${state.n +}"', mark="assign"),
        "${state.n +}",
        "${state.n + 1}",
    ),
    Case(
        "bad_expression-cel-syntax-in-params",
        "bad_expression",
        "a",
        assign_n(param='"${size(state.n}"', mark="param"),
        "${size(state.n}",
        "${string(state.n)}",
    ),
    Case(
        "bad_expression-unknown-namespace",
        "bad_expression",
        "a",
        assign_n(assign='"${stat.n}"', mark="assign"),
        "${stat.n}",
        "${state.n}",
    ),
    Case(
        "bad_expression-unknown-namespace-cel",
        "bad_expression",
        "a",
        assign_n(assign='"${size(stats) + 1}"', mark="assign"),
        "${size(stats) + 1}",
        "${size(state) + 1}",
    ),
    Case(
        "bad_expression-result-in-params",
        "bad_expression",
        "a",
        assign_n(param='"${result.value}"', mark="param"),
        "${result.value}",
        "${state.n}",
    ),
    Case(
        "bad_expression-unknown-namespace-in-when",
        "bad_expression",
        "a",
        assign_n(when='"reslt.ok == true"', mark="when"),
        "reslt.ok",
        "result.ok",
    ),
    Case(
        "bad_foreach-over-5",
        "bad_foreach",
        "each",
        foreach(over="5  # <-"),
        "over: 5",
        "over: [1, 2]",
    ),
    Case(
        "bad_foreach-as-state",
        "bad_foreach",
        "each",
        foreach(as_="state  # <-"),
        "as: state",
        "as: url",
    ),
    Case(
        "bad_foreach-max_concurrency-without-parallel",
        "bad_foreach",
        "each",
        foreach(concurrency="max_concurrency: 4  # <-"),
        "parallel: false",
        "parallel: true",
    ),
    Case(
        "bad_foreach-batch_size-without-parallel",
        "bad_foreach",
        "each",
        foreach(concurrency="batch_size: 4  # <-"),
        "parallel: false",
        "parallel: true",
    ),
    Case(
        "unknown_graph",
        "unknown_graph",
        "call",
        """
        id: parent
        config: {start: call}
        nodes:
          call:
            type: subgraph
            graph: team/chlid  # <-
            next: done
          done:
            type: return
        """,
        "team/chlid",
        "team/child",
    ),
    Case(
        "invalid_schema-unknown-key",
        "invalid_schema",
        "fetch",
        """
        id: t
        config: {start: fetch}
        nodes:
          fetch:
            action: {tool: echo}
            nxet: done  # <-
          done:
            type: return
        """,
        "nxet:",
        "next:",
    ),
    Case(
        "invalid_schema-unknown-node-type",
        "invalid_schema",
        "done",
        """
        id: t
        config: {start: a}
        nodes:
          a:
            action: {tool: echo}
            next: done
          done:  # <-
            type: retrun
        """,
        "type: retrun",
        "type: return",
    ),
    Case(
        "invalid_schema-negative-retry-delay",
        "invalid_schema",
        "a",
        """
        id: t
        config: {start: a}
        nodes:
          a:
            action: {tool: echo}
            retry:
              - max_attempts: 2
                initial: -1  # <-
            next: done
          done:
            type: return
        """,
        "initial: -1",
        "initial: 0.5",
    ),
    Case(
        "invalid_schema-python-fn-form",
        "invalid_schema",
        "a",
        """
        id: t
        config: {start: a}
        nodes:
          a:
            action:
              tool: python
              params:
                fn: mypkg.text.summarize  # <-
            next: done
          done:
            type: return
        """,
        "mypkg.text.summarize",
        "mypkg.text:summarize",
    ),
    Case(
        "invalid_schema-field-written-twice",
        "invalid_schema",
        "a",
        """
        id: t
        config: {start: a}
        nodes:
          a:  # <-
            action: {tool: echo}
            result_key: out
            assign:
              out: "${result.value}"
            next: done
          done:
            type: return
        """,
        "result_key: out",
        "result_key: raw",
    ),
]


@pytest.fixture
def child_graph(tmp_path: Path) -> Path:
    """`team/child`, in the directory of the graphs under test."""
    return write(tmp_path, CHILD, "child.yaml")


@pytest.mark.parametrize("case", ERROR_CASES, ids=lambda c: c.id)
def test_error_code_is_reported_on_its_line(tmp_path: Path, child_graph: Path, case: Case) -> None:
    graph, report, path = inspect(tmp_path, case.bad)
    assert graph is None
    assert not report.valid
    found = [i for i in report.errors if i.code == case.code]
    assert found, f"expected {case.code}, got {report.errors}"
    line = marked_line(case.bad)
    at_line = [i for i in found if i.line == line]
    assert at_line, f"expected {case.code} on line {line}, got {found}"
    issue = at_line[0]
    assert issue.node == case.node
    assert issue.file == str(path)
    assert issue.message
    with pytest.raises(GraphValidationError) as info:
        load_graph(path, settings=Settings())
    assert case.code in info.value.codes
    assert str(path) in str(info.value)


@pytest.mark.parametrize("case", ERROR_CASES, ids=lambda c: c.id)
def test_similar_graph_does_not_report_the_code(tmp_path: Path, child_graph: Path, case: Case) -> None:
    graph, report, _ = inspect(tmp_path, case.good())
    assert case.code not in codes(report.errors)
    assert report.errors == []
    assert isinstance(graph, Graph)


@pytest.mark.parametrize("value", ["0", "-3", '"4"', "2.5", "true", "1001"])
def test_a_batch_size_that_is_not_a_count_of_items_names_the_node_and_the_field(
    tmp_path: Path, value: str
) -> None:
    text = foreach(concurrency=f"batch_size: {value}  # <-").replace("parallel: false", "parallel: true")
    _, report, _ = inspect(tmp_path, text)
    [issue] = report.errors
    assert (issue.code, issue.node, issue.line) == ("invalid_schema", "each", marked_line(text))
    assert issue.message.startswith("node 'each': batch_size: ")


def test_unknown_key_suggests_the_right_one(tmp_path: Path) -> None:
    _, report, _ = inspect(
        tmp_path,
        """
        id: t
        config: {start: fetch}
        nodes:
          fetch:
            action: {tool: echo}
            nxet: done
          done:
            type: return
        """,
    )
    messages = [i.message for i in report.errors if i.code == "invalid_schema"]
    assert messages == ["node 'fetch': unknown key 'nxet' (did you mean 'next'?)"]


def test_unknown_node_type_names_the_types(tmp_path: Path) -> None:
    _, report, _ = inspect(
        tmp_path,
        """
        id: t
        config: {start: done}
        nodes:
          done:
            type: retrun
        """,
    )
    [issue] = report.errors
    assert issue.code == "invalid_schema"
    assert "unknown node type" in issue.message
    assert "return" in issue.message


def test_same_field_written_twice_names_both_writers(tmp_path: Path) -> None:
    _, report, _ = inspect(
        tmp_path,
        """
        id: t
        config: {start: a}
        nodes:
          a:
            action: {tool: echo}
            result_key: out
            assign: {out: "${result.value}"}
        """,
    )
    [issue] = report.errors
    assert issue.code == "invalid_schema"
    assert "'out'" in issue.message
    assert "assign" in issue.message
    assert "result_key" in issue.message


BAD_NODE_NAME = """
id: t
config: {start: a}
nodes:
  a:
    action: {tool: echo}
    next: done
  done:
    type: return
  "bad name":  # <-
    type: return
"""


def test_bad_node_name_is_invalid_schema(tmp_path: Path) -> None:
    graph, report, path = inspect(tmp_path, BAD_NODE_NAME)
    assert graph is None
    assert [i.code for i in report.errors] == ["invalid_schema"]
    assert "'bad name'" in report.errors[0].message
    assert report.errors[0].file == str(path)
    _, report, _ = inspect(tmp_path, BAD_NODE_NAME.replace('"bad name"', "good_name-2"))
    assert "invalid_schema" not in codes(report.errors)


def test_bad_node_name_is_reported_on_its_own_line(tmp_path: Path) -> None:
    _, report, _ = inspect(tmp_path, BAD_NODE_NAME)
    [issue] = report.errors
    assert issue.line == marked_line(BAD_NODE_NAME)


def test_end_sentinel_is_not_a_node_name(tmp_path: Path) -> None:
    _, report, _ = inspect(
        tmp_path,
        """
        id: t
        config: {start: a}
        nodes:
          a:
            type: return
          $end:
            type: return
        """,
    )
    assert codes(report.errors) == {"invalid_schema"}
    assert "$end" in report.errors[0].message


def test_negative_delay_in_single_retry_policy_is_reported_on_its_line(tmp_path: Path) -> None:
    text = """
    id: t
    config: {start: a}
    nodes:
      a:
        action: {tool: echo}
        retry:
          max_attempts: 2
          initial: -1  # <-
    """
    _, report, _ = inspect(tmp_path, text)
    [issue] = report.errors
    assert issue.code == "invalid_schema"
    assert issue.line == marked_line(text)


BAD_PARAMS = """
id: t
config: {start: a}
nodes:
  a:
    action:
      tool: echo
      params:
        fine: "${state.n}"
        first: "${nope.x}"  # <-
        second: "${result.value}"
    next: done
  done:
    type: return
"""


def test_bad_expression_in_params_names_the_node_and_namespace(tmp_path: Path) -> None:
    _, report, _ = inspect(tmp_path, BAD_PARAMS)
    found = [i for i in report.errors if i.code == "bad_expression"]
    assert found
    assert all(i.node == "a" for i in found)
    assert "'nope'" in found[0].message


def test_every_bad_param_expression_is_reported_on_its_own_line(tmp_path: Path) -> None:
    _, report, _ = inspect(tmp_path, BAD_PARAMS)
    found = [i for i in report.errors if i.code == "bad_expression"]
    assert [i.line for i in found] == [marked_line(BAD_PARAMS), marked_line(BAD_PARAMS) + 1]


def test_result_is_available_in_assign_next_and_output(tmp_path: Path) -> None:
    graph, report, _ = inspect(
        tmp_path,
        """
        id: t
        config: {start: a}
        nodes:
          a:
            action: {tool: echo, params: {status: 200}}
            assign: {status: "${result.status}"}
            next:
              - to: done
                when: "result.status == 200"
              - to: done
          done:
            type: return
            output: {status: "${state.status}"}
        """,
    )
    assert report.errors == []
    assert isinstance(graph, Graph)


def test_foreach_item_name_and_index_are_only_in_params(tmp_path: Path) -> None:
    text = foreach().replace('{u: "${url}"}', '{u: "${url}", i: "${index}"}')
    graph, report, _ = inspect(tmp_path, text)
    assert report.errors == [] and graph is not None
    bad = text.replace("collect: pages", 'assign: {last: "${url}"}')
    _, report, _ = inspect(tmp_path, bad)
    assert [(i.code, i.node) for i in report.errors] == [("bad_expression", "each")]


# -- warnings -----------------------------------------------------------------------------


def warning_codes(report: ValidationReport) -> list[str]:
    return [i.code for i in report.warnings]


def test_no_return_node(tmp_path: Path) -> None:
    text = """
    id: t
    config: {start: a}
    nodes:
      a:
        action: {tool: echo}
    """
    graph, report, _ = inspect(tmp_path, text)
    assert graph is not None, "warnings do not make a graph invalid"
    assert "no_return_node" in warning_codes(report)
    text_with_return = dedent(text) + "    next: done\n  done:\n    type: return\n"
    graph, report, _ = inspect(tmp_path, text_with_return)
    assert graph is not None
    assert "no_return_node" not in warning_codes(report)


STATE_READ = """
id: t
STATE
config: {start: a}
nodes:
  a:
    action: {tool: echo, params: {v: "${state.x}"}}
    ASSIGN
    next: done
  done:
    type: return
"""


def state_read(state: str = "", assign: str = "") -> str:
    return STATE_READ.replace("STATE", state).replace("ASSIGN", assign)


def test_state_never_assigned(tmp_path: Path) -> None:
    graph, report, _ = inspect(tmp_path, state_read())
    assert graph is not None
    [warning] = [i for i in report.warnings if i.code == "state_never_assigned"]
    assert "state.x" in warning.message


@pytest.mark.parametrize(
    ("state", "assign"),
    [("state: {x: {type: string}}", ""), ("", 'assign: {x: "${result.v}"}')],
    ids=["declared", "assigned"],
)
def test_state_never_assigned_not_when_declared_or_written(tmp_path: Path, state: str, assign: str) -> None:
    graph, report, _ = inspect(tmp_path, state_read(state, assign))
    assert graph is not None
    assert "state_never_assigned" not in warning_codes(report)


STATE_WRITTEN = """
id: t
state:
  seen: {type: string, default: x}
  total: {type: integer, default: 0}
config: {start: a}
nodes:
  a:
    action: {tool: echo}
    assign: {total: 1}
    next: done
  done:
    type: return
    OUTPUT
"""


def test_state_never_read(tmp_path: Path) -> None:
    text = STATE_WRITTEN.replace("OUTPUT", 'output: {total: "${state.total}"}')
    graph, report, _ = inspect(tmp_path, text)
    assert graph is not None
    flagged = [i.location for i in report.warnings if i.code == "state_never_read"]
    assert flagged == ["state.seen"]


def test_state_never_read_not_when_the_output_is_the_whole_state(tmp_path: Path) -> None:
    text = STATE_WRITTEN.replace("OUTPUT", "description: the output is the whole state")
    graph, report, _ = inspect(tmp_path, text)
    assert graph is not None
    assert "state_never_read" not in warning_codes(report)


@pytest.mark.parametrize(
    "route",
    [
        'next:\n      - to: $end\n        when: "inputs.stop == true"\n      - to: done',
        'next: {fn: "route_targets:route"}',
    ],
    ids=["to-$end", "next-fn"],
)
def test_state_never_read_not_when_a_route_ends_with_the_whole_state(tmp_path: Path, route: str) -> None:
    text = STATE_WRITTEN.replace("next: done", route).replace("OUTPUT", 'output: {total: "${state.total}"}')
    graph, report, _ = inspect(tmp_path, text)
    assert graph is not None
    assert "state_never_read" not in warning_codes(report)


ENV_GRAPH = """
id: t
config:
  start: a
  env_requires: [GR_TEST_GRAPH_TOKEN]
nodes:
  a:
    action: {tool: echo}
    env_requires: [GR_TEST_NODE_TOKEN]
    next: done
  done:
    type: return
"""


def test_env_missing_with_check_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GR_TEST_GRAPH_TOKEN", raising=False)
    monkeypatch.delenv("GR_TEST_NODE_TOKEN", raising=False)
    graph, report, _ = inspect(tmp_path, ENV_GRAPH, check_env=True)
    assert graph is not None
    missing = [(i.node, i.message) for i in report.warnings if i.code == "env_missing"]
    assert len(missing) == 2
    assert missing[0][0] is None and "GR_TEST_GRAPH_TOKEN" in missing[0][1]
    assert missing[1][0] == "a" and "GR_TEST_NODE_TOKEN" in missing[1][1]


def test_env_missing_only_with_check_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GR_TEST_GRAPH_TOKEN", raising=False)
    monkeypatch.delenv("GR_TEST_NODE_TOKEN", raising=False)
    _, report, _ = inspect(tmp_path, ENV_GRAPH)
    assert "env_missing" not in warning_codes(report)


def test_env_missing_not_when_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GR_TEST_GRAPH_TOKEN", "x")
    monkeypatch.setenv("GR_TEST_NODE_TOKEN", "y")
    _, report, _ = inspect(tmp_path, ENV_GRAPH, check_env=True)
    assert "env_missing" not in warning_codes(report)


# -- Rye-compatible forms and other accepted spellings -------------------------------------


def load_text(text: str) -> Graph:
    return parse_graph(dedent(text), settings=Settings())


RYE = """
id: t
config: {start: fetch}
nodes:
  fetch:
    node_type: action
    action: {primary: execute, item_type: tool, item_id: echo, params: {x: 1}}
    next: {type: unconditional, to: check}
  check:
    node_type: gate
    next:
      type: conditional
      branches:
        - {when: "state.x == 1", to: done}
      default: other
  other:
    node_type: return
  done:
    node_type: return
"""

NATIVE = """
id: t
config: {start: fetch}
nodes:
  fetch:
    type: action
    action: {tool: echo, params: {x: 1}}
    next: check
  check:
    type: gate
    next:
      - {when: "state.x == 1", to: done}
      - to: other
  other:
    type: return
  done:
    type: return
"""


def test_rye_forms_normalise_to_the_native_graph() -> None:
    rye = load_text(RYE)
    native = load_text(NATIVE)
    assert {k: v.model_dump() for k, v in rye.spec.nodes.items()} == {
        k: v.model_dump() for k, v in native.spec.nodes.items()
    }
    fetch = rye.spec.nodes["fetch"]
    assert isinstance(fetch, ActionNode)
    assert (fetch.action.tool, fetch.action.params) == ("echo", {"x": 1})
    assert fetch.next is not None and fetch.next.targets == ("check",)
    check = rye.spec.nodes["check"]
    assert isinstance(check, GateNode)
    assert check.next is not None
    assert [(b.to, b.when) for b in check.next.branches] == [("done", "state.x == 1"), ("other", None)]
    assert isinstance(rye.spec.nodes["done"], ReturnNode)


def test_rye_action_with_another_primary_is_rejected() -> None:
    with pytest.raises(GraphValidationError) as info:
        load_text(RYE.replace("primary: execute", "primary: search"))
    assert info.value.codes == ["invalid_schema"]
    assert info.value.issues[0].node == "fetch"


def test_type_and_node_type_together_are_rejected() -> None:
    with pytest.raises(GraphValidationError) as info:
        load_text(RYE.replace("node_type: gate", "node_type: gate\n    type: gate"))
    assert "invalid_schema" in info.value.codes


def test_retry_is_one_policy_or_a_list() -> None:
    graph = load_text(
        """
        id: t
        config: {start: one}
        nodes:
          one:
            action: {tool: echo}
            retry: {max_attempts: 5, initial: 1}
            on_error: none
            next: many
          many:
            action: {tool: echo}
            retry:
              - {max_attempts: 2, on: [timeout]}
              - {max_attempts: 4, on: [MyError, transient]}
          none:
            action: {tool: echo}
        """
    )
    one, many, none = (graph.spec.nodes[n] for n in ("one", "many", "none"))
    assert isinstance(one, ActionNode) and isinstance(many, ActionNode) and isinstance(none, ActionNode)
    assert one.retry == (RetryPolicy(max_attempts=5, initial=1),)
    assert many.retry is not None
    assert [(p.max_attempts, p.on) for p in many.retry] == [(2, ("timeout",)), (4, ("MyError", "transient"))]
    assert many.retry[1].matches("permanent", "MyError")
    assert not many.retry[0].matches("transient", None)
    assert none.retry is None


def test_next_fn_routes_by_a_python_function() -> None:
    graph = load_text(
        """
        id: t
        state:
          go: {type: boolean, default: false}
        config: {start: a}
        nodes:
          a:
            action: {tool: echo}
            next: {fn: "route_targets:route"}
          done:
            type: return
            output: {went: done}
        """
    )
    a = graph.spec.nodes["a"]
    assert isinstance(a, ActionNode) and a.next is not None
    assert a.next.fn == "route_targets:route"
    assert a.next.branches == ()
    compiled = graph.nodes["a"].next
    assert compiled is not None and compiled.fn is route_targets.route
    assert "unreachable_node" not in codes(graph.report.errors)
    assert graph.invoke_sync(state={"go": True}).output == {"went": "done"}


def test_next_fn_with_another_key_is_rejected() -> None:
    with pytest.raises(GraphValidationError) as info:
        load_text(
            """
            id: t
            config: {start: a}
            nodes:
              a:
                action: {tool: echo}
                next: {fn: "route_targets:route", to: a}
            """
        )
    assert info.value.codes == ["invalid_schema"]


def test_next_fn_that_does_not_import_is_invalid() -> None:
    with pytest.raises(GraphValidationError) as info:
        load_text(
            """
            id: t
            config: {start: a}
            nodes:
              a:
                action: {tool: echo}
                next: {fn: "route_targets:no_such_function"}
            """
        )
    assert info.value.codes == ["invalid_schema"]
    assert info.value.issues[0].node == "a"


@pytest.mark.parametrize(
    "nxt",
    ["next: $end", 'next: "$end"', 'next:\n  - to: $end\n    when: "inputs.stop"\n  - to: done'],
    ids=["bare", "quoted", "branch"],
)
def test_end_is_a_valid_next_target(tmp_path: Path, nxt: str) -> None:
    text = dedent(
        """
        id: t
        config: {start: a}
        nodes:
          a:
            action: {tool: echo}
            on_error: done
            NEXT
          done:
            type: return
        """
    ).replace("NEXT", textwrap.indent(nxt, "    ").lstrip())
    graph, report, _ = inspect(tmp_path, text)
    assert report.errors == []
    assert graph is not None
    a = graph.spec.nodes["a"]
    assert isinstance(a, ActionNode) and a.next is not None
    assert "$end" in a.next.targets


def test_a_node_may_be_named_end(tmp_path: Path) -> None:
    graph, report, _ = inspect(
        tmp_path,
        """
        id: t
        config: {start: a}
        nodes:
          a:
            action: {tool: echo}
            next: END
          END:
            type: return
            output: {reached: true}
        """,
    )
    assert report.errors == []
    assert graph is not None
    assert isinstance(graph.spec.nodes["END"], ReturnNode)
    assert graph.invoke_sync().output == {"reached": True}


# -- YAML reading rules --------------------------------------------------------------------


def test_on_inside_retry_stays_the_key_on() -> None:
    graph = load_text(
        """
        id: t
        config: {start: a}
        nodes:
          a:
            action: {tool: echo, params: {flag: yes, off: no, real: true}}
            retry: {max_attempts: 2, on: [validation]}
        """
    )
    a = graph.spec.nodes["a"]
    assert isinstance(a, ActionNode) and a.retry is not None
    assert a.retry[0].on == ("validation",)
    assert a.action.params == {"flag": "yes", "off": "no", "real": True}
    data = parse_yaml("on: 1\nyes: y\nOff: FALSE\n").data
    assert data == {"on": 1, "yes": "y", "Off": False}


def test_dates_stay_strings() -> None:
    graph = load_text(
        """
        id: t
        version: 2024-01-31
        config: {start: a}
        nodes:
          a:
            action: {tool: echo, params: {day: 2024-01-31, at: 2024-01-31T10:20:30Z}}
        """
    )
    assert graph.spec.version == "2024-01-31"
    a = graph.spec.nodes["a"]
    assert isinstance(a, ActionNode)
    assert a.action.params == {"day": "2024-01-31", "at": "2024-01-31T10:20:30Z"}


HASHED = """
# a comment
id: t
description: hashed
state:
  n: {type: integer, default: 0}
config: {start: a}
nodes:
  a:
    action: {tool: echo, params: {x: 1, y: 2}}
    next: done
  done:
    type: return
"""

HASHED_REORDERED = """
nodes:
  done:
    type: return   # the end
  a:
    next: done
    action: {params: {y: 2, x: 1}, tool: echo}
config: {start: a}
state:
  n: {default: 0, type: integer}
description: hashed
id: t
"""


def test_content_hash_ignores_key_order_and_comments() -> None:
    first = load_text(HASHED).content_hash
    assert first == load_text(HASHED_REORDERED).content_hash
    assert len(first) == 64
    assert first == content_hash(parse_yaml(dedent(HASHED)).data)


@pytest.mark.parametrize(
    ("old", "new"),
    [("y: 2", "y: 3"), ("default: 0", "default: 1"), ("description: hashed", "description: other")],
)
def test_content_hash_changes_with_a_value(old: str, new: str) -> None:
    assert old in HASHED
    assert load_text(HASHED).content_hash != load_text(HASHED.replace(old, new)).content_hash
