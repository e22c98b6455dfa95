"""`graphrunner validate` on a Rye file runs the walker's static analysis (issue 16, step 4):
reachability from `start` and missing `env_requires` are warnings, `${state.X}` flow is checked
with `state.inputs` seeded, and a dispatch the file's own permissions refuse is reported."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from graphrunner.loading.loader import inspect_graph
from graphrunner.report import ValidationReport
from graphrunner.settings import Settings

RYE = """\
tool_type: graph
permissions: [rye.execute.tool.rye.bash.*]
config:
  start: first
  env_requires: [GRAPHRUNNER_TEST_SURELY_UNSET_VAR]
  nodes:
    first:
      action: {primary: execute, item_id: "tool:rye/bash/bash", params: {command: "echo ${state.inputs.x}"}}
      assign: {said: "${result.stdout}"}
      next: done
    stray:
      action: {primary: execute, item_id: echo, params: {value: "${state.never_written}"}}
      next: done
    done: {type: return, output: {said: "${state.said}"}}
"""


def report_of(tmp_path: Path, text: str, name: str = "walk.yaml") -> ValidationReport:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return inspect_graph(path, settings=Settings())[1]


def test_the_walkers_static_analysis_warns_and_never_refuses(tmp_path: Path) -> None:
    report = report_of(tmp_path, RYE)
    assert report.errors == []
    found = {(w.code, w.line) for w in report.warnings}
    assert ("unreachable_node", 11) in found  # an error in a graphrunner file, a warning here
    assert ("env_missing", 5) in found  # always checked, as the walker's preflight does
    assert ("rye_permission_missing", 12) in found  # echo is not in the file's permissions
    never = [w.message for w in report.warnings if w.code == "state_never_assigned"]
    assert not [m for m in never if "state.inputs" in m]  # the walker seeds it
    assert [m for m in never if "state.never_written" in m]


def test_the_same_graph_written_for_graphrunner_refuses_the_unreachable_node(tmp_path: Path) -> None:
    native = (
        "id: walk\nconfig: {start: first}\nnodes:\n"
        "  first: {action: {tool: echo, params: {}}, next: done}\n"
        "  stray: {action: {tool: echo, params: {}}, next: done}\n"
        "  done: {type: return}\n"
    )
    report = report_of(tmp_path, native)
    assert [(i.code, i.node) for i in report.errors] == [("unreachable_node", "stray")]


@pytest.mark.parametrize("key", ["dialect: rye", "permissions: [rye.execute.tool.echo]"])
def test_a_graphrunner_file_does_not_write_what_only_a_rye_envelope_sets(tmp_path: Path, key: str) -> None:
    text = f"id: x\n{key}\nconfig: {{start: a}}\nnodes: {{a: {{type: return}}}}\n"
    report = report_of(tmp_path, text)
    assert [(i.code, i.line) for i in report.errors] == [("invalid_schema", 2)]
    assert "not written in a graphrunner file" in report.errors[0].message


def test_validate_prints_the_warnings_in_graphrunners_format(tmp_path: Path) -> None:
    path = tmp_path / "walk.yaml"
    path.write_text(RYE)
    done = subprocess.run(
        [sys.executable, "-m", "graphrunner", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert (
        f"{path}:11: [unreachable_node] node 'stray' cannot be reached from 'first'"
        in done.stdout + done.stderr
    )
    assert f"{path}:5: [env_missing]" in done.stdout + done.stderr


MAPPED = """\
tool_type: graph
config:
  start: write
  nodes:
    write:
      action: {primary: execute, item_type: tool, item_id: rye/file-system/write, params: {path: x}}
"""


def validate(path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "graphrunner", "validate", str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env={**os.environ, **env})


def test_a_rye_id_is_mapped_to_a_tool_by_the_deployment(tmp_path: Path) -> None:
    path = tmp_path / "mapped.yaml"
    path.write_text(MAPPED)
    unmapped = validate(path)
    assert unmapped.returncode == 1
    assert f"{path}:6: [unknown_tool]" in unmapped.stdout
    assert "GRAPHRUNNER_RYE_TOOLS='rye/file-system/write=TOOL'" in unmapped.stdout
    mapped = validate(path, GRAPHRUNNER_RYE_TOOLS="rye/file-system/write=echo")
    assert mapped.returncode == 0, mapped.stderr


@pytest.mark.parametrize(
    ("mapping", "words"),
    [
        ("echo=shell", "'echo' collides with the built-in tool 'echo'"),
        ("rye/x=nope", "no tool 'nope' is registered"),
        ("rye/x", "bad pair 'rye/x'"),
    ],
)
def test_a_bad_mapping_is_a_clear_usage_error(tmp_path: Path, mapping: str, words: str) -> None:
    path = tmp_path / "mapped.yaml"
    path.write_text(MAPPED)
    done = validate(path, GRAPHRUNNER_RYE_TOOLS=mapping)
    assert done.returncode == 2
    assert done.stderr.startswith("error: GRAPHRUNNER_RYE_TOOLS:")
    assert words in done.stderr
    assert "Traceback" not in done.stderr
