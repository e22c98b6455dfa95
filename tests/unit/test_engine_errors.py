"""Error handling in whole runs (DESIGN §2.5): retry, hooks, _last_error, on_error, error_mode."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import engine_targets
import pytest

from graphrunner import RunResult, StateValidationError

NO_WAIT = "initial: 0, jitter: 0"


@pytest.fixture(autouse=True)
def _fresh_counters() -> Iterator[None]:
    engine_targets.reset()
    yield
    engine_targets.reset()


def flaky_graph(failures: int, extra: str = "", retry: str = f"{{max_attempts: 3, {NO_WAIT}}}") -> str:
    return f"""
        id: flaky
        config: {{start: call}}
        nodes:
          call:
            action: {{tool: python, params: {{fn: "engine_targets:flaky", args: {{key: k, failures: {failures}}}}}}}
            retry: {retry}
            assign: {{answer: "${{result.value}}"}}
            {extra}
    """


def test_retry_then_success(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(flaky_graph(2))
    assert result.status == "completed"
    assert result.state["answer"] == "ok"
    assert engine_targets.calls["k"] == 3
    # every attempt is in the transcript: two retried failures, then the step itself
    assert [(s["status"], s["attempts"]) for s in result.steps] == [("retry", 1), ("retry", 2), ("end", 3)]
    assert all(s["error"]["error_type"] == "ConnectionError" for s in result.steps[:2])
    assert all(s["retry_in_s"] >= 0 for s in result.steps[:2])


def test_retries_exhausted_then_on_error(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(
        flaky_graph(5, extra="on_error: recover\n            next: $end")
        + """
          recover: {type: gate, assign: {recovered: "${state._last_error.attempts}"}}
    """
    )
    assert result.status == "completed"
    assert result.path == ["call", "recover"]
    assert engine_targets.calls["k"] == 3
    assert result.state["recovered"] == 3
    last = result.state["_last_error"]
    assert (last["node"], last["step"], last["type"], last["error_type"]) == (
        "call",
        1,
        "transient",
        "ConnectionError",
    )


def test_permanent_errors_are_not_retried_by_default(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml("""
        id: perm
        config: {start: a}
        nodes:
          a: {action: {tool: python, params: {fn: "engine_targets:boom"}}}
    """)
    assert result.status == "failed"
    assert result.steps[0]["attempts"] == 1


def test_retry_policy_list_matched_by_error_type(run_yaml: Callable[..., RunResult]) -> None:
    retry = f"[{{on: [RuntimeError], max_attempts: 1, {NO_WAIT}}}, {{on: [ConnectionError], max_attempts: 4, {NO_WAIT}}}]"
    result = run_yaml(flaky_graph(3, retry=retry))
    assert result.status == "completed"
    assert engine_targets.calls["k"] == 4


def test_error_mode_continue_completes_with_errors(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml("""
        id: cont
        state: {log: {type: list, default: [], reducer: append}}
        config: {start: a, error_mode: continue}
        nodes:
          a:
            action: {tool: fail, params: {message: nope}}
            assign: {log: [never]}
            next: b
          b: {type: gate, assign: {log: [b]}}
    """)
    assert result.status == "completed_with_errors"
    assert result.errors_suppressed == 1
    assert result.errors[0].node == "a" and result.errors[0].step == 1
    assert result.errors[0].error.message == "nope"
    assert result.state["log"] == ["b"]  # assign of the failed node is skipped
    assert result.path == ["a", "b"]


def test_node_error_mode_overrides_graph(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml("""
        id: override
        config: {start: a, error_mode: continue}
        nodes:
          a: {action: {tool: fail}, error_mode: fail, next: b}
          b: {type: gate}
    """)
    assert result.status == "failed"
    assert result.path == ["a"]


def test_node_timeout(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml("""
        id: slow
        config: {start: a}
        nodes:
          a:
            action: {tool: python, params: {fn: "engine_targets:slow", args: {seconds: 5}}}
            timeout: 0.2
            retry: {max_attempts: 1}
    """)
    assert result.status == "failed"
    assert result.error is not None and result.error.type == "timeout"
    assert "timeout of 0.2s" in result.error.message


def test_max_steps_stops_a_cycle(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml("""
        id: loop
        state: {n: {type: integer, default: 0}}
        config: {start: a, max_steps: 5}
        nodes:
          a: {type: gate, assign: {n: "${state.n + 1}"}, next: a}
    """)
    assert result.status == "failed"
    assert result.error is not None and result.error.type == "limit_exceeded"
    assert result.step_count == 5
    assert result.state["n"] == 5


def hook_graph(answer: str) -> str:
    return f"""
        id: hooked
        config:
          start: a
          hooks:
            - event: error
              when: "event.node == 'a'"
              action: {{tool: python, params: {{fn: "engine_targets:hook_answer", args: {{answer: {answer}}}}}}}
            - {{event: after_step, action: {{tool: python, params: {{fn: "engine_targets:count", args: {{key: after}}}}}}}}
            - {{event: graph_started, action: {{tool: python, params: {{fn: "engine_targets:count", args: {{key: started}}}}}}}}
            - {{event: graph_completed, action: {{tool: python, params: {{fn: "engine_targets:count", args: {{key: completed}}}}}}}}
        nodes:
          a:
            action: {{tool: python, params: {{fn: "engine_targets:flaky", args: {{key: k, failures: 1}}}}}}
            retry: {{max_attempts: 1}}
            next: b
          b: {{type: gate, assign: {{done: true}}}}
    """


def test_error_hook_answers_retry(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(hook_graph("retry"))
    assert result.status == "completed"
    assert engine_targets.calls["k"] == 2 and engine_targets.calls["hook"] == 1
    assert engine_targets.calls["started"] == 1 and engine_targets.calls["completed"] == 1
    assert engine_targets.calls["after"] == 2


def test_error_hook_answers_continue(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(hook_graph("continue"))
    assert result.status == "completed_with_errors"
    assert result.path == ["a", "b"]


def test_error_hook_answers_fail(run_yaml: Callable[..., RunResult]) -> None:
    text = hook_graph("fail").replace(
        "retry: {max_attempts: 1}", "retry: {max_attempts: 1}\n            on_error: b"
    )
    result = run_yaml(text)
    assert result.status == "failed"  # the hook's fail wins over on_error
    assert result.path == ["a"]


def test_a_failing_hook_never_breaks_the_run(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml("""
        id: badhook
        config:
          start: a
          hooks: [{event: after_step, action: {tool: python, params: {fn: "engine_targets:hook_raises"}}}]
        nodes:
          a: {type: gate, assign: {v: 1}}
    """)
    assert result.status == "completed"
    assert result.state["v"] == 1


def test_env_requires_is_checked_before_the_first_step(
    run_yaml: Callable[..., RunResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GRAPHRUNNER_TEST_TOKEN", raising=False)
    text = """
        id: env
        config: {start: a, env_requires: [GRAPHRUNNER_TEST_TOKEN]}
        nodes:
          a: {action: {tool: python, params: {fn: "engine_targets:count", args: {key: ran}}}}
    """
    result = run_yaml(text)
    assert result.status == "failed"
    assert result.error is not None and result.error.type == "env_missing"
    assert "GRAPHRUNNER_TEST_TOKEN" in result.error.message
    assert engine_targets.calls["ran"] == 0
    monkeypatch.setenv("GRAPHRUNNER_TEST_TOKEN", "x")
    assert run_yaml(text).status == "completed"


def test_bad_inputs_raise_before_any_run(run_yaml: Callable[..., RunResult]) -> None:
    text = """
        id: typed
        inputs: {n: {type: integer, required: true}, mode: {enum: [a, b], default: a}}
        config: {start: a}
        nodes:
          a: {type: gate}
    """
    with pytest.raises(StateValidationError) as caught:
        run_yaml(text, {"n": "seven", "extra": 1, "mode": "c"})
    assert set(caught.value.fields) == {"n", "extra", "mode"}
    assert "'n' must be integer" in str(caught.value)
    with pytest.raises(StateValidationError, match="input 'n' is required"):
        run_yaml(text, {})
    assert run_yaml(text, {"n": 3}).status == "completed"


def test_declared_types_are_checked_at_exit(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml("""
        id: exit-types
        state: {count: {type: integer, default: 0}}
        config: {start: a}
        nodes:
          a: {type: gate, assign: {count: "not a number"}}
    """)
    assert result.status == "failed"
    assert result.error is not None and result.error.type == "state_validation_error"
    assert "'count' must be integer" in result.error.message


def test_edge_exception_from_a_condition(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml("""
        id: edge
        config: {start: a}
        nodes:
          a: {type: gate, assign: {v: 1}, next: [{to: b, when: "state.v.nope == 1"}, {to: b}]}
          b: {type: gate}
    """)
    assert result.status == "failed"
    assert result.error is not None and result.error.type == "edge_exception"
    assert result.state["v"] == 1
