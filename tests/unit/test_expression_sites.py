"""An expression that fails at run time, at every site of a graph, in-process (issue 12).

Each ends as a failed run (or follows `on_error` / `error_mode: continue`) whose error names
the node, the site and the expression; never a Python exception out of `invoke`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from yaml_files import assert_no_traceback, write

from graphrunner import RunResult, load_graph
from graphrunner.cli import main

DIVIDE = "inputs.a / inputs.b"
ZERO = {"a": 1, "b": 0}


def failed_with(result: RunResult, node: str, *parts: str) -> str:
    """The run failed at `node` with a message naming every one of `parts`."""
    assert result.status == "failed", result
    assert result.error is not None
    assert result.error.node == node
    message: str = result.error.message
    for part in parts:
        assert part in message, message
    return message


def test_action_params(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(
        """
        id: sites
        config: {start: a}
        nodes:
          a: {action: {tool: echo, params: {x: "${inputs.a / inputs.b}"}}}
        """,
        ZERO,
    )
    message = failed_with(result, "a", "node 'a'", "params", f"'{DIVIDE}' failed: division by zero")
    assert result.error is not None and result.error.type == "node_exception"
    assert message.startswith("node 'a': params: ")


def test_assign(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(
        """
        id: sites
        config: {start: a}
        nodes:
          a: {type: gate, assign: {out: "${inputs.a / inputs.b}"}}
        """,
        ZERO,
    )
    failed_with(result, "a", "node 'a': assign.out: ", f"'{DIVIDE}' failed: division by zero")


def test_assign_index_out_of_range(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(
        """
        id: sites
        config: {start: a}
        nodes:
          a: {type: gate, assign: {first: "${inputs.l[0]}"}}
        """,
        {"l": []},
    )
    failed_with(result, "a", "node 'a': assign.first: ", "'inputs.l[0]' failed: index out of bounds")


def test_next_condition(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(
        """
        id: sites
        config: {start: a}
        nodes:
          a: {type: gate, next: [{to: b, when: "inputs.a / inputs.b > 1"}, {to: b}]}
          b: {type: return}
        """,
        ZERO,
    )
    failed_with(result, "a", "node 'a': next condition failed", f"'{DIVIDE} > 1' failed: division by zero")
    assert result.error is not None and result.error.type == "edge_exception"


def test_foreach_over(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(
        """
        id: sites
        config: {start: f}
        nodes:
          f:
            type: foreach
            over: "${[inputs.a / inputs.b]}"
            action: {tool: echo}
        """,
        ZERO,
    )
    failed_with(result, "f", "node 'f': over: ", "division by zero")


def test_foreach_item_params(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(
        """
        id: sites
        config: {start: f}
        nodes:
          f:
            type: foreach
            over: [1, 0]
            action: {tool: echo, params: {x: "${10 / item}"}}
        """,
    )
    failed_with(result, "f", "item 1", "node 'f': params: ", "'10 / item' failed: division by zero")


def test_return_output(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(
        """
        id: sites
        config: {start: done}
        nodes:
          done: {type: return, output: {x: "${inputs.a % inputs.b}"}}
        """,
        ZERO,
    )
    failed_with(result, "done", "node 'done': output: ", "'inputs.a % inputs.b' failed: modulo by zero")


def test_subgraph_inputs(tmp_path: Path) -> None:
    write(
        tmp_path,
        "child.yaml",
        """
        id: child
        inputs: {x: {type: any}}
        config: {start: done}
        nodes: {done: {type: return}}
        """,
    )
    parent = write(
        tmp_path,
        "parent.yaml",
        """
        id: parent
        inputs: {a: integer, b: integer}
        config: {start: s}
        nodes:
          s: {type: subgraph, graph: child, inputs: {x: "${inputs.a / inputs.b}"}}
        """,
    )
    result = load_graph(parent).invoke_sync(ZERO)
    failed_with(result, "s", "node 's': inputs: ", f"'{DIVIDE}' failed: division by zero")


@pytest.mark.parametrize("site", ["when", "params"])
def test_a_failing_hook_expression_is_skipped(run_yaml: Callable[..., RunResult], site: str) -> None:
    """Hooks never break a run (DESIGN §2.7): a hook whose expression fails does not fire."""
    hook = (
        "{event: after_step, when: 'inputs.a / inputs.b > 0', action: {tool: fail}}"
        if site == "when"
        else "{event: after_step, action: {tool: echo, params: {x: '${inputs.l[3]}'}}}"
    )
    result = run_yaml(
        f"""
        id: sites
        config: {{start: a, hooks: [{hook}]}}
        nodes:
          a: {{type: gate, assign: {{v: 1}}}}
        """,
        {**ZERO, "l": []},
    )
    assert result.status == "completed"
    assert result.state["v"] == 1


def test_on_error_catches_failing_params(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(
        """
        id: sites
        config: {start: a}
        nodes:
          a:
            action: {tool: echo, params: {x: "${inputs.a / inputs.b}"}}
            on_error: recover
          recover: {type: gate, assign: {why: "${state._last_error.message}"}}
        """,
        ZERO,
    )
    assert result.status == "completed"
    assert result.path == ["a", "recover"]
    assert "division by zero" in result.state["why"]
    assert result.state["_last_error"]["error_type"] == "ExpressionError"


def test_error_mode_continue_records_failing_params(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(
        """
        id: sites
        config: {start: a, error_mode: continue}
        nodes:
          a:
            action: {tool: echo, params: {x: "${inputs.a / inputs.b}"}}
            next: done
          done: {type: return, output: {ok: true}}
        """,
        ZERO,
    )
    assert result.status == "completed_with_errors"
    assert result.output == {"ok": True}
    [suppressed] = result.errors
    assert suppressed.node == "a" and "division by zero" in suppressed.error.message


def test_cli_run_in_process_reports_the_expression(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "x.yaml",
        """
        id: x
        inputs: {a: number, b: number}
        config: {start: go}
        nodes:
          go: {type: gate, assign: {out: "${inputs.a / inputs.b}"}}
        """,
    )
    result = CliRunner().invoke(
        main, ["run", str(path), "--in-process", "-i", "a=1", "-i", "b=0"], env={"GRAPHRUNNER_QUIET": "1"}
    )
    assert result.exit_code == 1, result.output
    assert_no_traceback(result)
    assert "node 'go': assign.out: expression 'inputs.a / inputs.b' failed: division by zero" in result.stdout
