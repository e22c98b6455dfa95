"""`matches` runs in linear time (issue 29, item 2): patterns are compiled by RE2, so no pattern
from a graph or an input can make a match backtrack; syntax RE2 lacks is a located error at
load (a constant pattern) or a step error naming the node (a pattern computed at run time).
CEL's `matches()` is the Rust `regex` crate's, linear too: checked here as well."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphrunner import Graph, GraphValidationError, RunResult
from graphrunner.errors import ExpressionError
from graphrunner.expressions import compile_condition, compile_template
from graphrunner.model import StructuredCondition

NAMES = frozenset({"state", "inputs"})
JOIN_TIMEOUT = 10.0  # generous: each match is microseconds with RE2, minutes with backtracking


def finishes(match: Callable[[], bool]) -> bool:
    """`match()` run in a thread that must end within JOIN_TIMEOUT seconds; its answer."""
    answer: list[bool] = []
    thread = threading.Thread(target=lambda: answer.append(match()), daemon=True)
    thread.start()
    thread.join(JOIN_TIMEOUT)
    assert not thread.is_alive(), "the match did not finish: it backtracks"
    return answer[0]


def structured(pattern: str) -> Callable[[str], bool]:
    condition = compile_condition(StructuredCondition(path="state.v", op="matches", value=pattern), NAMES)
    return lambda text: condition.holds({"state": {"v": text}})


def test_the_issue_example_finishes() -> None:
    """Today's code (Python's `re`) takes seconds to minutes on this: `re.search("(a+)+$", "a" * 30
    + "b")` backtracks 2**30 ways. Not run against `re` here, so the suite never stalls."""
    assert finishes(lambda: structured("(a+)+$")("a" * 30 + "b")) is False
    assert finishes(lambda: structured("(a+)+$")("a" * 30)) is True


# each catastrophic pattern and an equivalent that Python's `re` matches without backtracking
EQUIVALENT = {
    "(a+)+$": "a+$",
    "(a|aa)+$": "a+$",
    "(a|a?)+$": "$",  # an empty match at the end: always
    "(a*)*b": "b",
    "((a+)+)+c": "a+c",
    "(a+){2,}$": "aa+$",
    "(.*a){12}$": "(?:a[^a]*){11}a$",  # at least 12 `a`s, the last one at the end
}


@settings(max_examples=60, deadline=None)
@given(
    pattern=st.sampled_from(sorted(EQUIVALENT)),
    length=st.integers(min_value=0, max_value=4000),
    tail=st.sampled_from(["", "b", "c", "!", "ab", "ac"]),
)
def test_catastrophic_patterns_finish_with_the_right_answer(pattern: str, length: int, tail: str) -> None:
    text = "a" * length + tail
    assert finishes(lambda: structured(pattern)(text)) is (re.search(EQUIVALENT[pattern], text) is not None)


@settings(max_examples=30, deadline=None)
@given(pattern=st.sampled_from(sorted(EQUIVALENT)), length=st.integers(min_value=0, max_value=3000))
def test_cel_matches_is_linear_too(pattern: str, length: int) -> None:
    template = compile_template("${state.v.matches(state.p)}", NAMES)
    text = "a" * length + "!"
    got = finishes(lambda: template.render({"state": {"v": text, "p": pattern}}))
    assert got is (re.search(EQUIVALENT[pattern], text) is not None)


@pytest.mark.parametrize(
    ("pattern", "says"),
    [(r"(a)\1", r"invalid escape sequence: \1"), ("(?=a)", "invalid perl operator"), ("(?<!a)b", "(?<")],
    ids=["backreference", "lookahead", "lookbehind"],
)
def test_a_constant_pattern_re2_lacks_is_a_located_error_at_load(
    graph_of: Callable[[str], Graph], pattern: str, says: str
) -> None:
    with pytest.raises(GraphValidationError) as info:
        graph_of(
            f"""
            id: re
            state: {{v: {{type: string}}}}
            config: {{start: a}}
            nodes:
              a:
                type: gate
                next:
                  - {{to: b, when: {{path: state.v, op: matches, value: '{pattern}'}}}}
                  - {{to: b}}
              b: {{type: return}}
            """
        )
    issue = info.value.issues[0]
    assert issue.code == "bad_expression" and issue.node == "a"
    assert "node 'a': next" in issue.message and says in issue.message
    assert "RE2 syntax" in issue.message and "no backreferences or lookaround" in issue.message


def test_a_computed_pattern_re2_lacks_fails_the_step_naming_the_node(
    run_yaml: Callable[..., RunResult],
) -> None:
    result = run_yaml(
        """
        id: re
        inputs: {pattern: {type: string}, text: {type: string}}
        config: {start: a}
        nodes:
          a:
            type: gate
            next:
              - {to: b, when: {path: inputs.text, op: matches, value: "${inputs.pattern}"}}
              - {to: b}
          b: {type: return}
        """,
        {"pattern": r"(x)\1", "text": "xx"},
    )
    assert result.status == "failed" and result.error is not None
    assert result.error.node == "a" and "bad regular expression" in result.error.message
    assert "RE2 syntax" in result.error.message


@pytest.mark.parametrize("text", ["$(rm -rf /)", "'; DROP TABLE x; --", "a" * 5000 + "!\n", "é💥"])
def test_hostile_text_is_data(text: str) -> None:
    assert structured(r"^[a-z]+$")(text) is False
    assert structured(r"rm|DROP|💥")(text) is (text[:1] in "$'é")


def test_a_runtime_pattern_error_is_an_expression_error() -> None:
    condition = compile_condition(
        StructuredCondition(path="state.v", op="matches", value="${state.p}"), NAMES
    )
    context: dict[str, Any] = {"state": {"v": "ab", "p": "(?P<n>a)(?P=n)"}}
    with pytest.raises(ExpressionError, match="bad regular expression"):
        condition.holds(context)


@settings(max_examples=200, deadline=None)
@given(
    pattern=st.sampled_from(
        ["a$", "^a+$", r"a\Z", "b\n$", "(?m)^a$", r"\$", "^$", "a|b$", r"^(a|b)*\n?$", r"a\b", "[ab]$"]
    ),
    text=st.text(alphabet="ab\n$", max_size=6),
)
def test_matches_as_python_re_did_on_patterns_both_take(pattern: str, text: str) -> None:
    """`$` also before a final newline, `\\Z` the very end: what `matches` meant with Python's `re`."""
    assert structured(pattern)(text) is (re.search(pattern, text) is not None)
