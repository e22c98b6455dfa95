"""Rye graph files load as written: the envelope, `config_schema` as the inputs, the graph under
`config:`, signature lines; every error points at the line the author wrote (issue 16, step 1).

These graphs call graphrunner's `echo` (a Rye id that names no Rye tool is a tool name).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from graphrunner.loading.loader import inspect_graph, load_graph
from graphrunner.report import ValidationReport
from graphrunner.settings import Settings

PROJECT_STATS = """\
# rye:signed:2026-01-01T00:00:00Z:abc:def:key
<!-- rye:unsigned -->
version: "1.0.0"
tool_type: graph
executor_id: rye/core/runtimes/state-graph/runtime
category: workflows/test
description: Count the Python files of a directory
config_schema:
  type: object
  properties:
    directory: {type: string, default: ".", minLength: 1}
    pattern: {type: string, enum: ["*.py", "*.md"], description: what to count}
    limits: {type: array}
    anything: {type: [string, "null"]}
  required: [pattern]
config:
  start: count_files
  max_steps: 10
  on_error: continue
  state: {seen: 0}
  hooks:
    - event: after_step
      condition: {path: state.seen, op: gt, value: 5}
      action: {primary: execute, item_type: tool, item_id: echo, params: {note: many}}
  nodes:
    count_files:
      action: {primary: execute, item_type: tool, item_id: echo,
               params: {command: "find ${inputs.directory} -name '${inputs.pattern}'"}}
      assign: {file_count: "${result.command}"}
      cache: true
      next: done
    done: {type: return}
"""


def write(tmp_path: Path, text: str, name: str = "stats.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def report_of(path: Path) -> ValidationReport:
    return inspect_graph(path, settings=Settings())[1]


def codes(report: ValidationReport) -> list[tuple[str, int | None]]:
    return [(i.code, i.line) for i in report.errors]


def test_a_rye_graph_file_loads_with_its_envelope_schema_and_config(tmp_path: Path) -> None:
    graph = load_graph(write(tmp_path, PROJECT_STATS), settings=Settings())
    spec = graph.spec
    assert (spec.id, spec.version, spec.description) == (
        "stats",
        "1.0.0",
        "Count the Python files of a directory",
    )
    assert (spec.config.start, spec.config.max_steps, spec.config.error_mode) == (
        "count_files",
        10,
        "continue",
    )
    inputs = {name: (f.type, f.required, f.default) for name, f in spec.inputs.items()}
    assert inputs == {
        "directory": ("string", False, "."),
        "pattern": ("string", True, None),
        "limits": ("list", False, None),
        "anything": ("any", False, None),
    }
    assert spec.inputs["pattern"].enum == ("*.py", "*.md")
    assert spec.state["seen"].default == 0
    assert spec.nodes["count_files"].cache_result is True  # the walker's `cache: true`
    assert spec.config.hooks[0].when is not None  # `condition:` is the hook's `when`


def test_the_graph_runs_with_the_inputs_its_schema_declares(tmp_path: Path) -> None:
    graph = load_graph(write(tmp_path, PROJECT_STATS), settings=Settings())
    result = graph.invoke_sync({"pattern": "*.py"})
    assert (result.status, result.path) == ("completed", ["count_files", "done"])
    assert result.state["file_count"] == "find . -name '*.py'"


def test_what_has_no_meaning_here_is_reported_as_a_located_warning(tmp_path: Path) -> None:
    report = report_of(write(tmp_path, PROJECT_STATS))
    assert report.errors == []
    found = {(w.code, w.line) for w in report.warnings}
    assert ("rye_ignored_key", 6) in found  # category
    assert ("rye_schema_keyword_ignored", 11) in found  # minLength of `directory`


def test_the_walker_default_of_max_steps_is_100(tmp_path: Path) -> None:
    text = PROJECT_STATS.replace("  max_steps: 10\n", "")
    assert load_graph(write(tmp_path, text), settings=Settings()).spec.config.max_steps == 100


def test_signature_lines_keep_the_lines_of_later_errors(tmp_path: Path) -> None:
    text = PROJECT_STATS.replace("item_id: echo,\n", "item_id: no/such/tool,\n")
    report = report_of(write(tmp_path, text))
    assert codes(report) == [("unknown_tool", 27)]  # the 2 signature lines are counted
    assert report.errors[0].location == "config.nodes.count_files.action.item_id"


def test_a_schema_error_in_a_node_points_at_config_nodes(tmp_path: Path) -> None:
    text = PROJECT_STATS.replace("      cache: true\n", "      cache: true\n      colour: blue\n")
    report = report_of(write(tmp_path, text))
    assert [(i.code, i.line) for i in report.errors] == [("invalid_schema", 31)]
    assert (report.errors[0].location or "").startswith("config.nodes.count_files")


@pytest.mark.parametrize(
    ("change", "code", "line", "words"),
    [
        (("config:\n", "settings:\n"), "rye_missing_config", None, "under 'config:'"),
        (
            ("config_schema:\n  type: object\n", "config_schema:\n  type: array\n"),
            "rye_bad_config_schema",
            9,
            "object",
        ),
        (("  required: [pattern]\n", "  required: [patern]\n"), "rye_bad_config_schema", 15, "'patern'"),
        (("tool_type: graph\n", "tool_type: python\n"), "rye_not_a_graph", 4, "only Rye graph tools"),
        (
            ("category:", "permissions: [rye.execute.tool.echo, tool:echo]\ncategory:"),
            "rye_bad_permissions",
            6,
            "'tool:echo' is not a Rye capability",
        ),
        (
            ("category:", "permissions: rye.execute.tool.echo\ncategory:"),
            "rye_bad_permissions",
            6,
            "must be a list",
        ),
        (
            ("category:", "permissions: [rye.run.tool.echo]\ncategory:"),
            "rye_bad_permissions",
            6,
            "unknown primary 'run'",
        ),
        (("description:", "nodes: {}\ndescription:"), "rye_mixed_forms", 7, "top level"),
    ],
    ids=[
        "no config",
        "schema not an object",
        "required unknown",
        "not a graph",
        "not a capability",
        "permissions not a list",
        "unknown primary",
        "mixed",
    ],
)
def test_bad_rye_files_are_refused_with_located_errors(
    tmp_path: Path, change: tuple[str, str], code: str, line: int | None, words: str
) -> None:
    report = report_of(write(tmp_path, PROJECT_STATS.replace(*change, 1)))
    assert [i.code for i in report.errors] == [code]
    assert words in report.errors[0].message
    if line is not None:
        assert report.errors[0].line == line


def test_a_config_schema_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    text = "tool_type: graph\nconfig_schema: [directory]\nconfig:\n  nodes: {done: {type: return}}\n"
    report = report_of(write(tmp_path, text))
    assert [(i.code, i.line) for i in report.errors] == [("rye_bad_config_schema", 2)]


def test_a_file_with_its_graph_under_config_is_rye_even_without_tool_type(tmp_path: Path) -> None:
    text = "config:\n  start: done\n  nodes: {done: {type: return, output: {ok: true}}}\n"
    graph = load_graph(write(tmp_path, text, "bare.yaml"), settings=Settings())
    assert (graph.spec.id, graph.spec.config.max_steps) == ("bare", 100)
    assert graph.invoke_sync({}).output == {"ok": True}
