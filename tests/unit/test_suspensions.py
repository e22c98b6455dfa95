"""The pieces suspended steps are made of: waits, deferred dispatch, result cache, messages, hooks files."""

from __future__ import annotations

import asyncio
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import engine_targets
import pytest

from graphrunner.cluster.runs.items import call_from, call_payload, outcome_of, record_of
from graphrunner.cluster.transport.messages import ItemMessage, StepMessage
from graphrunner.cluster.waits.foreach import ForeachWait
from graphrunner.cluster.waits.timers import RetryWait
from graphrunner.engine import ActionCall, Wait
from graphrunner.errors import BadMessage, ConfigurationError, ToolError
from graphrunner.graph import Graph
from graphrunner.loading.hooks_file import load_hooks_file
from graphrunner.model import RetryPolicy
from graphrunner.runner import LocalRunner
from graphrunner.services import StepServices
from graphrunner.services.cache import MemoryCache, cache_key
from graphrunner.services.dispatch import Deferred, dispatch
from graphrunner.tools import ToolContext, default_registry

CONTEXT = ToolContext(run_id="r", graph_id="g", node="n", step=1)


def flaky_call(key: str, failures: int, initial: float) -> ActionCall:
    policy = RetryPolicy(max_attempts=5, initial=initial, jitter=0)
    params = {"fn": "engine_targets:flaky", "args": {"key": key, "failures": failures}}
    return ActionCall(node="n", tool="python", params=params, retry=(policy,))


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_wait_round_trips_through_its_stored_form() -> None:
    wait = RetryWait(due=time.time() + 5, attempt=3, hook_round=1)
    stored = wait.model_dump(mode="json")
    assert stored["kind"] == "retry" and "child" not in stored  # empty fields are not stored
    assert Wait.parse(stored) == wait
    assert 4 < wait.remaining() <= 5
    assert ForeachWait().remaining() == 0
    assert Wait.parse({"kind": "items", "next": 3, "unknown_later_field": 1}).next == 3


def test_short_retry_waits_are_slept_and_every_failed_attempt_is_reported() -> None:
    engine_targets.reset()
    outcome = run(dispatch(default_registry(), flaky_call("short", 2, 0.0), CONTEXT, inline_wait=1.0))
    assert outcome.ok and outcome.attempts == 3
    assert [r.attempt for r in outcome.retries] == [1, 2]
    assert outcome.retries[0].failure.error_type == "ConnectionError"


def test_a_long_retry_wait_comes_back_deferred_and_goes_on_from_its_attempt() -> None:
    engine_targets.reset()
    call = flaky_call("long", 1, 2.0)
    deferred = run(dispatch(default_registry(), call, CONTEXT, inline_wait=1.0))
    assert isinstance(deferred, Deferred)
    assert (deferred.kind, deferred.delay, deferred.attempt) == ("retry", 2.0, 2)
    assert engine_targets.calls["long"] == 1  # nothing slept, nothing retried yet
    outcome = run(dispatch(default_registry(), call, CONTEXT, inline_wait=1.0, attempt=deferred.attempt))
    assert outcome.ok and outcome.attempts == 2 and engine_targets.calls["long"] == 2


def test_sleep_defers_on_a_worker_and_sleeps_in_process() -> None:
    call = ActionCall(node="nap", tool="sleep", params={"seconds": 30})
    deferred = run(dispatch(default_registry(), call, ToolContext("r", "g", "nap", 1, durable=True)))
    assert isinstance(deferred, Deferred)
    assert (deferred.kind, deferred.delay, deferred.result) == ("timer", 30, {"slept": 30})
    quick = ActionCall(node="nap", tool="sleep", params={"seconds": 0.01})
    assert run(dispatch(default_registry(), quick, CONTEXT)).result == {"slept": 0.01}


def test_a_result_that_is_not_json_fails_the_action_naming_node_item_and_tool() -> None:
    call = ActionCall(node="n", tool="python", params={"fn": "engine_targets:unserializable"}, item_index=4)
    outcome = run(dispatch(default_registry(), call, CONTEXT))
    assert not outcome.ok
    assert outcome.failure.classification == "validation"
    assert "node 'n' (item 4): tool 'python'" in outcome.failure.message
    assert "not JSON-serializable" in outcome.failure.message


def test_the_cache_key_covers_graph_node_action_and_tool_version() -> None:
    call = ActionCall(node="n", tool="echo", params={"a": 1})
    base = cache_key("h1", call, "1")
    assert base == cache_key("h1", ActionCall(node="n", tool="echo", params={"a": 1}), "1")
    others = [
        cache_key("h2", call, "1"),
        cache_key("h1", ActionCall(node="m", tool="echo", params={"a": 1}), "1"),
        cache_key("h1", ActionCall(node="n", tool="echo", params={"a": 2}), "1"),
        cache_key("h1", call, "2"),
    ]
    assert base not in others and len(set(others)) == 4


def test_memory_cache_entries_expire_and_are_copies() -> None:
    cache = MemoryCache()
    value = {"a": [1]}
    cache.cache_set("k", value, ttl=60)
    value["a"].append(2)
    assert cache.cache_get("k") == (True, {"a": [1]})
    cache.cache_set("gone", 1, ttl=0)
    time.sleep(0.01)
    assert cache.cache_get("gone") == (False, None)


def test_an_in_process_cache_hit_skips_the_tool(graph_of: Callable[[str], Graph]) -> None:
    engine_targets.reset()
    graph = graph_of("""
        id: cached
        state: {n: {type: integer}}
        config: {start: a}
        nodes:
          a:
            action: {tool: python, params: {fn: "engine_targets:count", args: {key: cached}}}
            cache_result: true
            assign: {n: "${result.value}"}
    """)
    runner = LocalRunner()
    first = run(runner.invoke(graph))
    second = run(runner.invoke(graph))
    assert first.state == second.state == {"n": 1}
    assert engine_targets.calls["cached"] == 1
    assert (first.steps[0]["cache_hit"], second.steps[0]["cache_hit"]) == (False, True)
    assert second.steps[0]["attempts"] == 0
    assert run(LocalRunner().invoke(graph)).state == {"n": 2}  # a fresh runner, a fresh cache


def test_step_messages_take_an_optional_phase_and_the_child_that_woke_them() -> None:
    assert StepMessage.parse(("r1", 3), {}).phase == 0
    assert StepMessage.parse(("r1", 3, 2), {}).phase == 2
    assert StepMessage.parse(("r1", 3, 2, "r1.4.web"), {}).child == "r1.4.web"
    bad = (("r1", 3, 2, "not an id!"), ("r1", 3, 2, "r1.4", "extra"))
    for args in (("r1",), ("r1", 3, -1), ("r1", 3, "2"), ("r1", 3, 2, 1), *bad, "r1", None, {"a": 1}):
        with pytest.raises(BadMessage):
            StepMessage.parse(args, {})


def test_item_messages_are_checked_and_calls_survive_the_wire() -> None:
    call = flaky_call("wire", 0, 0.5)
    assert call_from(call_payload(call)) == call
    good = {"run_id": "r1", "graph_id": "g", "graph_hash": "h", "step": 1, "tag": "1.1.x", "index": 0}
    assert ItemMessage.parse(({**good, "call": call_payload(call)},), {}).index == 0
    for args in ((), ("not a mapping",), ({**good, "call": {}, "index": -1},), ({**good},)):
        with pytest.raises(BadMessage, match="foreach item message"):
            ItemMessage.parse(args, {})


def test_item_records_round_trip_to_outcomes() -> None:
    ok = outcome_of(0, "a", {"ok": True, "result": {"v": 1}, "attempts": 2})
    assert ok.outcome.ok and ok.outcome.result == {"v": 1} and ok.outcome.attempts == 2
    failed = outcome_of(1, "b", {"ok": False, "error": {"type": "transient", "message": "down"}})
    assert failed.outcome.failure is not None and failed.outcome.failure.message == "down"
    missing = outcome_of(2, "c", None)
    assert missing.outcome.failure is not None and "item 2" in missing.outcome.failure.message
    assert record_of(ok.outcome).model_dump() == {"ok": True, "attempts": 2, "result": {"v": 1}}


def write_hooks(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hooks.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_deployment_hooks_file_loads_and_its_hooks_only_observe(
    tmp_path: Path, graph_of: Callable[[str], Graph]
) -> None:
    engine_targets.reset()
    hooks = load_hooks_file(
        write_hooks(
            tmp_path,
            """
            hooks:
              - event: error
                action: {tool: python, params: {fn: "engine_targets:hook_answer", args: {answer: continue, key: deploy}}}
              - event: graph_completed
                action: {tool: python, params: {fn: "engine_targets:count", args: {key: completed}}}
            """,
        )
    )
    graph = graph_of("""
        id: failing
        config: {start: a}
        nodes:
          a: {action: {tool: fail, params: {message: nope}}}
    """)
    result = run(LocalRunner(StepServices(deployment_hooks=hooks)).invoke(graph))
    assert result.status == "failed"  # the deployment hook's "continue" changes nothing
    assert engine_targets.calls["deploy"] == 1 and engine_targets.calls["completed"] == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hooks:\n  - {event: finished, action: {tool: echo}}\n", "hooks.0.event"),
        ("hooks:\n  - {event: error, action: {tool: nope}}\n", "unknown tool 'nope'"),
        ("hooks:\n  - {event: error, when: 'state.(', action: {tool: echo}}\n", "when"),
        ("- {event: error, action: {tool: echo}}\n", "expected a mapping with one key"),
        ("hooks: [\n", "hooks.yaml"),
    ],
)
def test_a_bad_deployment_hooks_file_is_a_configuration_error_naming_file_and_entry(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write_hooks(tmp_path, text)
    with pytest.raises(ConfigurationError, match="GRAPHRUNNER_HOOKS") as caught:
        load_hooks_file(path)
    assert message in str(caught.value) and str(path) in str(caught.value)


def test_a_missing_deployment_hooks_file_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read"):
        load_hooks_file(tmp_path / "absent.yaml")


@pytest.mark.parametrize(
    ("result", "problem", "category"),
    [
        ({"text": "\ud800"}, "unpaired surrogate", "validation"),
        ([[[[0]]]], None, None),
        (float("nan"), "result holds nan: nan is not a JSON number", "non_finite_number"),
        ({"a": [1, {"b": float("-inf")}]}, r"result.a\[1\].b holds -inf", "non_finite_number"),
        ({1: "a"}, "not a string", "validation"),
    ],
)
def test_a_result_a_run_cannot_hold_fails_the_action(result: Any, problem: str | None, category: str) -> None:
    from graphrunner.services.dispatch import check_serializable

    call = ActionCall(node="n", tool="python", params={})
    if problem is None:
        check_serializable(call, result)  # shallow enough: fine
        return
    with pytest.raises(ToolError, match=problem) as caught:
        check_serializable(call, result)
    assert caught.value.classification == category and "node 'n'" in str(caught.value)


def test_a_result_nested_too_deeply_is_refused_not_a_recursion_error() -> None:
    from graphrunner.services.dispatch import check_serializable

    deep: Any = 0
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(ToolError, match="nested more than 64 levels"):
        check_serializable(ActionCall(node="n", tool="python", params={}), deep)
