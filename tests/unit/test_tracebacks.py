"""Debuggable failures: tracebacks kept in transcript records and run errors, capped; a failed
step logged by the worker; a pause node's message on the run and its record. In-process runs,
and the real executor over a MemoryStore (tests/unit/memory_cluster.py)."""

from __future__ import annotations

import logging
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import traceback_targets
from memory_cluster import MemoryCluster, submit

from graphrunner import RunResult, load_graph, parse_graph
from graphrunner.cli.progress import progress_line
from graphrunner.cli.result import human_summary
from graphrunner.cli.runs import status_lines
from graphrunner.engine import RunStatus
from graphrunner.services import StepServices
from graphrunner.tools import ToolRegistry
from graphrunner.tools.builtin import BUILTIN_TOOLS
from graphrunner.tracebacks import MAX_CHARS, MAX_FRAMES, cap, format_traceback

MOD = traceback_targets.__name__


def one_node(action: str, extra: str = "") -> str:
    """A graph of one action node `a` (its action: `action`, YAML flow) and `extra` node lines."""
    return f"""
    id: unit/tb
    config: {{start: a}}
    nodes:
      a:
        action: {action}
    {extra}"""


def python(fn: str, args: str = "{}") -> str:
    return f'{{tool: python, params: {{fn: "{MOD}:{fn}", args: {args}}}}}'


def step_errors(result: RunResult) -> list[dict[str, Any]]:
    """The errors of the run's transcript records, in order."""
    return [r["error"] for r in result.steps if r.get("error")]


# -- a Python tool's traceback --------------------------------------------------------------------


@pytest.mark.parametrize("fn", ["boom", "aboom"])
def test_a_python_tool_keeps_the_frames_of_its_function(run_yaml: Callable[..., RunResult], fn: str) -> None:
    result = run_yaml(one_node(python(fn, "{x: 3}")))
    assert result.status == "failed" and result.error is not None
    trace = result.error.traceback
    assert trace.startswith("Traceback (most recent call last):")
    assert f", in {fn}\n" in trace and ", in check\n" in trace
    assert 'raise ValueError("I do not like 3")' in trace
    assert trace.endswith("ValueError: I do not like 3")
    assert "graphrunner" not in trace and "asyncio" not in trace  # how the tool was called is left out
    assert result.error.message == f"{MOD}:{fn}: ValueError: I do not like 3"
    assert step_errors(result)[-1]["traceback"] == trace
    assert "traceback" not in result.state["_last_error"]  # state holds no traceback


def test_the_error_object_keeps_its_shape_plus_the_traceback(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(one_node(python("boom", "{x: 3}")))
    assert result.error is not None
    assert set(result.error.to_dict()) == {"type", "message", "node", "step", "traceback"}
    assert (result.error.type, result.error.node, result.error.step) == ("node_exception", "a", 1)
    assert result.to_dict()["error"] == result.error.to_dict()


def test_a_tool_error_of_the_function_keeps_where_it_was_raised(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(one_node(python("refuse")))
    assert result.error is not None and result.error.message == "not today"
    assert ", in refuse\n" in result.error.traceback


def test_a_module_that_fails_while_imported_keeps_its_own_frames(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(one_node('{tool: python, params: {fn: "traceback_unloadable:f"}}'))
    assert result.error is not None and "raised LookupError: no settings file" in result.error.message
    trace = result.error.traceback
    assert trace.splitlines()[1].endswith(", in <module>") and ", in settings\n" in trace
    assert "importlib" not in trace and trace.endswith("LookupError: no settings file")


def test_a_module_that_is_not_there_has_no_traceback(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(one_node('{tool: python, params: {fn: "no_such_module_anywhere:f"}}'))
    assert result.error is not None and "No module named 'no_such_module_anywhere'" in result.error.message
    assert "traceback" not in result.error.to_dict()


def test_errors_without_an_exception_behind_them_have_no_traceback(
    run_yaml: Callable[..., RunResult],
) -> None:
    result = run_yaml(one_node('{tool: fail, params: {message: "no"}}'))
    assert result.error is not None and "traceback" not in result.error.to_dict()
    assert set(result.error.to_dict()) == {"type", "message", "node", "step"}
    assert all("traceback" not in e for e in step_errors(result))


def test_a_tool_with_a_bug_keeps_the_frames_from_its_run_on() -> None:
    registry = ToolRegistry([*BUILTIN_TOOLS, traceback_targets.Broken()])
    text = textwrap.dedent(one_node("{tool: test/broken}"))
    result = parse_graph(text, file="test.yaml", registry=registry).invoke_sync({}, registry=registry)
    assert result.error is not None and result.error.message == "KeyError: 'missing'"
    trace = result.error.traceback
    assert trace.splitlines()[1].endswith(", in run") and "traceback_targets.py" in trace
    assert trace.endswith("KeyError: 'missing'")


def test_every_retried_attempt_keeps_its_traceback(run_yaml: Callable[..., RunResult]) -> None:
    extra = "    retry: {max_attempts: 2, initial: 0.01, jitter: 0}"
    result = run_yaml(one_node(python("down"), extra))
    retries = [r for r in result.steps if r["status"] == "retry"]
    assert len(retries) == 1 and ", in down\n" in retries[0]["error"]["traceback"]
    assert result.error is not None and result.error.traceback.endswith("ConnectionError: the remote is down")


def test_suppressed_errors_keep_the_traceback_in_the_transcript_only(
    run_yaml: Callable[..., RunResult],
) -> None:
    text = one_node(python("boom", "{x: 3}"), "    error_mode: continue")
    result = run_yaml(text)
    assert result.status == "completed_with_errors"
    assert result.errors[0].error.traceback is None  # the run's `errors` stay small
    assert ", in boom\n" in step_errors(result)[0]["traceback"]


FOREACH = f"""
id: unit/tb-foreach
state: {{out: {{type: list, default: []}}, fan: any}}
config: {{start: fan}}
nodes:
  fan:
    type: foreach
    over: [1, 3, 5]
    as: v
    parallel: PARALLEL
    action: {{tool: python, params: {{fn: "{MOD}:fail_on", args: {{value: "${{v}}"}}}}}}
    collect: out
    MODE
"""


@pytest.mark.parametrize("parallel", [False, True])
def test_a_failing_foreach_keeps_its_first_failed_items_traceback(
    run_yaml: Callable[..., RunResult], parallel: bool
) -> None:
    result = run_yaml(FOREACH.replace("PARALLEL", str(parallel).lower()).replace("MODE", ""))
    assert result.error is not None and "first, item 1" in result.error.message
    assert ", in fail_on\n" in result.error.traceback


def test_the_failed_items_a_foreach_puts_in_state_have_no_traceback(
    run_yaml: Callable[..., RunResult],
) -> None:
    text = FOREACH.replace("PARALLEL", "false").replace("MODE", "error_mode: continue\n    result_key: fan")
    result = run_yaml(text)
    assert result.status == "completed_with_errors"
    failed = result.state["fan"]["failed"]
    assert len(failed) == 1 and "traceback" not in failed[0]["error"]


def test_a_failing_subgraph_node_keeps_its_child_runs_traceback(tmp_path: Any) -> None:
    child = textwrap.dedent(one_node(python("boom", "{x: 3}"))).replace("unit/tb", "unit/tb-child")
    (tmp_path / "child.yaml").write_text(child)
    parent = tmp_path / "parent.yaml"
    parent.write_text(
        "id: unit/tb-parent\nconfig: {start: sub}\nnodes:\n  sub: {type: subgraph, graph: unit/tb-child}\n"
    )
    result = load_graph(parent).invoke_sync({})
    assert result.error is not None and "subgraph 'unit/tb-child' ended failed" in result.error.message
    assert ", in boom\n" in result.error.traceback


def test_a_routing_function_that_raises_keeps_its_traceback(run_yaml: Callable[..., RunResult]) -> None:
    text = f"""
    id: unit/tb-route
    config: {{start: a}}
    nodes:
      a: {{action: {{tool: echo}}, next: {{fn: "{MOD}:route_raises"}}}}
      b: {{type: return}}
    """
    result = run_yaml(text)
    assert result.error is not None and result.error.type == "edge_exception"
    assert ", in route_raises\n" in result.error.traceback
    assert step_errors(result)[-1]["traceback"] == result.error.traceback


def test_a_custom_reducer_that_raises_keeps_its_traceback(run_yaml: Callable[..., RunResult]) -> None:
    text = f"""
    id: unit/tb-reducer
    state: {{n: {{type: integer, default: 0, reducer: "{MOD}:reducer_raises"}}}}
    config: {{start: a}}
    nodes:
      a: {{action: {{tool: echo}}, assign: {{n: 1}}}}
    """
    result = run_yaml(text)
    assert result.error is not None and result.error.type == "reducer_error"
    assert ", in reducer_raises\n" in result.error.traceback


def test_a_builtin_reducers_refusal_has_no_traceback(run_yaml: Callable[..., RunResult]) -> None:
    text = """
    id: unit/tb-append
    state: {xs: {type: list, default: [], reducer: append}}
    config: {start: a}
    nodes:
      a: {action: {tool: echo}, assign: {xs: "${1}"}}
    """
    result = run_yaml(text)
    assert result.error is not None and result.error.type == "reducer_error"
    assert "traceback" not in result.error.to_dict()


# -- the cap ------------------------------------------------------------------------------------------


def test_a_deep_traceback_keeps_its_innermost_frames() -> None:
    try:
        traceback_targets.ping(MAX_FRAMES)
    except RuntimeError as exc:
        trace = format_traceback(exc)
    assert trace.count(", in ping\n") + trace.count(", in pong\n") == MAX_FRAMES
    assert 'raise RuntimeError("bottom")' in trace and trace.endswith("RuntimeError: bottom")


def test_a_long_traceback_keeps_its_last_characters_from_a_line_start() -> None:
    text = "\n".join(f"line {i:05d}" for i in range(5000))
    capped = cap(text)
    head, _, rest = capped.partition("\n")
    assert head.startswith("[traceback cut: its first ") and "characters are left out]" in head
    assert len(rest) <= MAX_CHARS and rest.startswith("line ") and rest.endswith("line 04999")
    assert cap("short") == "short"


def test_an_unexpected_exception_keeps_every_frame() -> None:
    try:
        traceback_targets.boom(3)
    except ValueError as exc:
        trace = format_traceback(exc, user_frames=False)
    assert "test_tracebacks.py" in trace and ", in boom\n" in trace


# -- the worker: records, run errors and its log ------------------------------------------------------


@pytest.fixture
def mc() -> Iterator[MemoryCluster]:
    cluster = MemoryCluster()
    yield cluster
    cluster.close()


def test_the_cluster_keeps_the_same_traceback_as_the_in_process_runner(
    mc: MemoryCluster, run_yaml: Callable[..., RunResult]
) -> None:
    text = textwrap.dedent(one_node(python("boom", "{x: 3}")))
    run_id = submit(mc, text)
    mc.drive()
    snap = mc.snap(run_id)
    local = run_yaml(text)
    assert snap.error is not None and local.error is not None
    assert snap.error.traceback == local.error.traceback
    assert mc.records(run_id)[-1]["error"]["traceback"] == local.error.traceback


def test_the_worker_logs_a_failed_step_in_one_warning_line_and_its_traceback_at_info(
    mc: MemoryCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="graphrunner.worker.steps")
    run_id = submit(mc, textwrap.dedent(one_node(python("boom", "{x: 3}"))))
    mc.drive()
    records = [r for r in caplog.records if r.name == "graphrunner.worker.steps"]
    warning = next(r for r in records if r.levelno == logging.WARNING)
    line = warning.getMessage()
    assert "\n" not in line
    assert f"run {run_id} step 1 node 'a' failed (the run is failed): node_exception: " in line
    assert "ValueError: I do not like 3" in line and f"graphrunner steps {run_id} --traceback" in line
    info = next(r for r in records if r.levelno == logging.INFO).getMessage()
    assert ", in boom\n" in info and info.endswith("ValueError: I do not like 3")


def test_a_handled_failure_is_logged_as_the_run_going_on(
    mc: MemoryCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="graphrunner.worker.steps")
    text = one_node(
        '{tool: fail, params: {message: "line one\\nline two"}}',
        "    error_mode: continue\n        next: done\n      done: {type: return}",
    )
    run_id = submit(mc, textwrap.dedent(text))
    mc.drive()
    lines = [r.getMessage() for r in caplog.records if r.name == "graphrunner.worker.steps"]
    assert lines == [f"run {run_id} step 1 node 'a' failed (the run goes on): permanent: line one line two"]


class BrokenServices(StepServices):
    """Step services with a bug: completing a step raises."""

    async def finish(self, *args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError("division by zero")


def test_an_unexpected_exception_on_the_worker_keeps_its_traceback(mc: MemoryCluster) -> None:
    executor = mc.with_services(BrokenServices.from_settings(mc.settings, cache=mc.store))
    run_id = submit(mc, textwrap.dedent(one_node("{tool: echo}")))
    assert mc.step(executor).outcome == "failed_unexpectedly"
    error = mc.snap(run_id).error
    assert error is not None and error.traceback is not None
    assert error.traceback.endswith("ZeroDivisionError: division by zero")
    assert ", in finish\n" in error.traceback and ", in _execute\n" in error.traceback


# -- a pause node's message ---------------------------------------------------------------------------

PAUSE = """
id: unit/pause
state: {ok: {type: boolean, default: false}}
config: {start: ask}
nodes:
  ask: {type: pause, message: approve the lengths, next: done}
  done: {type: return}
"""


def test_a_paused_run_carries_its_pause_message(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(PAUSE)
    assert result.status == "paused" and result.message == "approve the lengths"
    assert result.to_dict()["message"] == "approve the lengths"
    assert result.steps[-1]["status"] == "paused" and result.steps[-1]["message"] == "approve the lengths"


def test_a_run_that_is_not_paused_has_no_message_key(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(one_node("{tool: echo}"))
    assert result.message is None and "message" not in result.to_dict()
    assert all("message" not in r for r in result.steps)


def test_a_pause_without_a_message(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(PAUSE.replace(", message: approve the lengths", ""))
    assert result.status == "paused" and result.message is None and "message" not in result.to_dict()
    assert "message: (none)" in human_summary(result)


def test_a_paused_child_gives_its_message_to_its_parent_in_process(tmp_path: Any) -> None:
    (tmp_path / "child.yaml").write_text(textwrap.dedent(PAUSE).replace("unit/pause", "unit/paused-child"))
    parent = tmp_path / "parent.yaml"
    parent.write_text(
        "id: unit/parent\nconfig: {start: sub}\nnodes:\n  sub: {type: subgraph, graph: unit/paused-child}\n"
    )
    result = load_graph(parent).invoke_sync({})
    assert result.status == "paused" and result.message == "approve the lengths"
    assert result.steps[-1]["message"] == "approve the lengths"


def test_on_the_cluster_the_message_goes_with_the_pause_and_a_resume_clears_it(mc: MemoryCluster) -> None:
    run_id = submit(mc, PAUSE)
    mc.drive()
    snap = mc.snap(run_id)
    assert snap.status is RunStatus.PAUSED and snap.pause_message == "approve the lengths"
    assert mc.client.run(run_id).result().to_dict()["message"] == "approve the lengths"
    assert mc.records(run_id)[-1]["message"] == "approve the lengths"
    mc.client.resume(run_id, {"ok": True})
    mc.drive()
    done = mc.snap(run_id)
    assert done.status is RunStatus.COMPLETED and done.pause_message is None
    assert "message" not in mc.client.run(run_id).result().to_dict()


TEMPLATED = """
id: unit/templated-pause
state: {n: {type: integer, default: 3}, order: {type: object, default: {id: A7}}}
config: {start: ask}
nodes:
  ask: {type: pause, message: "approve ${state.n} items of order ${state.order.id}?", next: done}
  done: {type: return}
"""


def test_a_pause_message_is_interpolated_with_the_state(
    run_yaml: Callable[..., RunResult], mc: MemoryCluster
) -> None:
    """In-process and on the cluster alike: the message as the state makes it when the run parks."""
    local = run_yaml(TEMPLATED, state={"n": 5})
    assert local.message == "approve 5 items of order A7?" == local.steps[-1]["message"]
    run_id = submit(mc, TEMPLATED)
    mc.drive()
    assert mc.snap(run_id).pause_message == "approve 3 items of order A7?"
    assert mc.records(run_id)[-1]["message"] == "approve 3 items of order A7?"


def test_a_pause_message_that_cannot_be_rendered_fails_the_run_naming_it(
    run_yaml: Callable[..., RunResult],
) -> None:
    result = run_yaml(TEMPLATED.replace("${state.n}", "${state.n / 0}"))
    assert result.status == "failed" and result.error is not None
    assert result.error.node == "ask" and result.error.message.startswith("node 'ask': message: ")


# -- what the CLI prints ------------------------------------------------------------------------------


def test_the_summary_and_status_show_the_failing_errors_traceback(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(one_node(python("boom", "{x: 3}")))
    for text in (human_summary(result), status_lines(result, {})):
        lines = text.splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("error: node_exception at node 'a'"))
        assert lines[at + 1] == "  Traceback (most recent call last):"
        assert lines[-1] == "  ValueError: I do not like 3"


def test_the_summary_and_status_show_the_pause_message(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(PAUSE)
    assert "message: approve the lengths" in human_summary(result).splitlines()
    assert "message: approve the lengths" in status_lines(result, {}).splitlines()


def test_progress_lines_show_tracebacks_only_when_asked(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(one_node(python("boom", "{x: 3}")))
    record = result.steps[-1]
    plain = progress_line("unit/tb", record)
    assert "\n" not in plain and plain.endswith("ValueError: I do not like 3")
    shown = progress_line("unit/tb", record, tracebacks=True).splitlines()
    assert shown[0] == plain and shown[1] == "    Traceback (most recent call last):"
    assert shown[-1] == "    ValueError: I do not like 3"


def test_the_progress_line_of_a_pause_shows_its_message(run_yaml: Callable[..., RunResult]) -> None:
    line = progress_line("unit/pause", run_yaml(PAUSE).steps[-1])
    assert "ask ⏸" in line and line.endswith(" — approve the lengths")
