"""Expressions that compile but fail when evaluated: always an `ExpressionError` naming them.

`pytest.raises(ExpressionError)` lets any other exception (ZeroDivisionError, IndexError,
RecursionError, ValueError from a huge integer...) fail the test.
"""

from __future__ import annotations

from typing import Any

import pytest

from graphrunner.errors import ExpressionError
from graphrunner.expressions import compile_condition, compile_expression, compile_template
from graphrunner.expressions.cel_expr import CelExpression
from graphrunner.model import StructuredCondition

NAMES = frozenset({"state", "inputs", "result"})


def deep(levels: int, kind: str = "dict") -> Any:
    """A value nested `levels` deep, built without recursion."""
    value: Any = 1
    for _ in range(levels):
        value = {"a": value} if kind == "dict" else [value]
    return value


def render_error(text: str, context: dict[str, Any]) -> str:
    with pytest.raises(ExpressionError) as info:
        compile_template(text, NAMES).render(context)
    assert info.value.expression is not None
    return str(info.value)


def test_division_by_zero_names_expression_and_cause() -> None:
    message = render_error("${inputs.a / inputs.b}", {"inputs": {"a": 1, "b": 0}})
    assert message == "expression 'inputs.a / inputs.b' failed: division by zero"


def test_modulo_by_zero() -> None:
    message = render_error("${inputs.a % inputs.b}", {"inputs": {"a": 1, "b": 0}})
    assert message == "expression 'inputs.a % inputs.b' failed: modulo by zero"


def test_index_into_an_empty_list() -> None:
    message = render_error("${inputs.l[0]}", {"inputs": {"l": []}})
    assert message.startswith("expression 'inputs.l[0]' failed: index out of bounds")


def test_failure_inside_text_names_the_expression() -> None:
    message = render_error("ratio ${inputs.a / inputs.b}!", {"inputs": {"a": 1, "b": 0}})
    assert "'inputs.a / inputs.b' failed: division by zero" in message


def test_integer_overflow() -> None:
    message = render_error("${inputs.a + 1}", {"inputs": {"a": 2**63 - 1}})
    assert message.startswith("expression 'inputs.a + 1' failed: ") and "overflow" in message


def test_result_too_deep_to_convert() -> None:
    message = render_error("${has(inputs.d) ? inputs.d : 1}", {"inputs": {"d": deep(5000)}})
    assert "nested too deeply" in message


@pytest.mark.parametrize(
    "value",
    [{1, 2}, object(), "\ud800", {(1, 2): 3}],
    ids=["set", "object", "lone-surrogate", "tuple-key"],
)
def test_values_cel_cannot_take(value: Any) -> None:
    message = render_error("${size(inputs.v) + 1}", {"inputs": {"v": value}})
    assert message.startswith("expression 'size(inputs.v) + 1' failed: ")


@pytest.mark.parametrize(
    "value",
    [deep(5000), {(1, 2): "tuple key"}, 10**5000, [10**5000]],
    ids=["deep", "tuple-key", "huge-int", "huge-int-in-list"],
)
def test_values_text_cannot_render(value: Any) -> None:
    message = render_error("v=${inputs.v}", {"inputs": {"v": value}})
    assert message.startswith("expression 'inputs.v' failed: ")


def holds(cond: Any, context: dict[str, Any]) -> bool:
    spec = StructuredCondition.model_validate(cond) if isinstance(cond, dict) else cond
    return compile_condition(spec, NAMES).holds(context)


def test_cel_condition_dividing_by_zero() -> None:
    with pytest.raises(ExpressionError, match=r"'state.a / state.b > 1' failed: division by zero"):
        holds("state.a / state.b > 1", {"state": {"a": 1, "b": 0}})


@pytest.mark.parametrize("value", [10**5000, deep(5000, "list")], ids=["huge-int", "deep-list"])
def test_non_boolean_condition_message_survives_any_value(value: Any) -> None:
    with pytest.raises(ExpressionError, match="not a boolean"):
        holds("${state.v}", {"state": {"v": value}})


@pytest.mark.parametrize("op", ["eq", "ne", "gt", "lte", "in", "not_in", "contains"])
def test_structured_ops_on_deep_values(op: str) -> None:
    state = {"v": [deep(5000, "list")], "w": [deep(5000, "list")]}  # equal, not the same object
    with pytest.raises(
        ExpressionError, match=rf"'state.v {op} '\$\{{state.w}}'' failed: .*nested too deeply"
    ):
        holds({"path": "state.v", "op": op, "value": "${state.w}"}, {"state": state})


def test_structured_gt_on_mixed_types_is_false() -> None:
    assert holds({"path": "state.v", "op": "gt", "value": [1]}, {"state": {"v": ["a"]}}) is False
    assert holds({"path": "state.v", "op": "gt", "value": 1}, {"state": {"v": {"a": 1}}}) is False


def test_structured_matches_with_a_bad_runtime_pattern() -> None:
    with pytest.raises(ExpressionError, match="bad regular expression"):
        holds({"path": "state.v", "op": "matches", "value": "${state.p}"}, {"state": {"v": "x", "p": "("}})


def test_structured_matches_with_a_non_string_pattern() -> None:
    with pytest.raises(ExpressionError, match="regular expression string"):
        holds({"path": "state.v", "op": "matches", "value": "${state.p}"}, {"state": {"v": "x", "p": 5}})


@pytest.mark.parametrize(
    "text",
    ["x" + " + x" * 2000, "a." * 2000 + "b == 1", "!" * 2000 + "true"],
    ids=["long-sum", "long-member-chain", "many-negations"],
)
def test_expression_with_too_many_operators_is_refused_at_compile(text: str) -> None:
    """The CEL library recurses per operator and overflows the stack (a segfault, not an
    exception) on long chains: such an expression must never reach it."""
    with pytest.raises(ExpressionError, match=r"2,?\d{3} operators, more than 256"):
        compile_template("${" + text + "}", frozenset({"x", "a"}))


def test_operators_inside_string_literals_do_not_count() -> None:
    text = '"' + "+" * 1000 + '" + "' + "." * 1000 + '"'
    assert compile_template("${" + text + "}", NAMES).render({}) == "+" * 1000 + "." * 1000


def test_a_long_list_literal_is_fine() -> None:
    text = "[" + ", ".join(["1"] * 1000) + "]"
    assert compile_template("${size(" + text + ")}", NAMES).render({}) == 1000


@pytest.mark.parametrize(
    "literal",
    ["1" * 5000, '"\\x"', '"\\ud800"', '"a\\udc00b"'],
    ids=["huge-int", "bad-escape", "lone-surrogate", "lone-low-surrogate"],
)
def test_fallback_literal_that_is_not_a_value_is_a_compile_error(literal: str) -> None:
    with pytest.raises(ExpressionError, match="does not parse"):
        compile_template("${state.x || " + literal + "}", NAMES)


def test_fallback_literals_that_are_values() -> None:
    template = compile_template('${state.x || "\\ud83d\\udca5\\n" || 1}', NAMES)
    assert template.render({"state": {}}) == "\U0001f4a5\n"


@pytest.mark.parametrize(
    "pattern",
    ["a{1001}", "(a{1000}){1000}", "(", "\\N{NO SUCH NAME}", "(?=a)"],
    ids=["repeat", "huge", "open", "name", "lookahead"],
)
def test_matches_with_a_pattern_re2_cannot_compile(pattern: str) -> None:
    with pytest.raises(ExpressionError, match="bad regular expression"):
        compile_condition(StructuredCondition(path="state.v", op="matches", value=pattern), NAMES)
    with pytest.raises(ExpressionError, match="bad regular expression"):
        holds(
            {"path": "state.v", "op": "matches", "value": "${state.p}"}, {"state": {"v": "x", "p": pattern}}
        )


class PanicException(BaseException):
    """Stands in for pyo3's PanicException: a Rust panic in the CEL library is a BaseException."""


class _Panicking:
    def execute(self, variables: dict[str, Any]) -> Any:
        raise PanicException("called `Option::unwrap()` on a `None` value")


def test_a_panic_in_the_cel_library_is_an_expression_error() -> None:
    expr = compile_expression("inputs.a + 1", NAMES)
    assert isinstance(expr, CelExpression)
    expr._program = _Panicking()  # type: ignore[assignment]
    with pytest.raises(ExpressionError, match=r"'inputs.a \+ 1' failed: called `Option::unwrap\(\)`"):
        expr.evaluate({"inputs": {"a": 1}})


def test_keyboard_interrupt_is_not_swallowed() -> None:
    class Interrupting:
        def execute(self, variables: dict[str, Any]) -> Any:
            raise KeyboardInterrupt

    expr = compile_expression("inputs.a + 1", NAMES)
    assert isinstance(expr, CelExpression)
    expr._program = Interrupting()  # type: ignore[assignment]
    with pytest.raises(KeyboardInterrupt):
        expr.evaluate({"inputs": {"a": 1}})
