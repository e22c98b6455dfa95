"""Conditions (DESIGN §2.3): CEL strings and the structured `{path, op, value}` form."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from graphrunner import namespaces
from graphrunner.errors import ExpressionError
from graphrunner.expressions import compile_condition
from graphrunner.model.conditions import StructuredCondition

NS = namespaces.WITH_RESULT
STATE: dict[str, Any] = {
    "n": 3,
    "ratio": 0.5,
    "flag": True,
    "off": False,
    "zero": 0,
    "empty": "",
    "none": None,
    "name": "report-2024.txt",
    "tags": ["a", "b"],
    "empty_list": [],
    "meta": {"k": "v"},
    "items": [{"id": 1}, {"id": 2}],
}
INPUTS: dict[str, Any] = {"threshold": 2, "high": 10, "pattern": r"^report-\d+", "wanted": ["a", "z"]}
CONTEXT: dict[str, Any] = {
    "state": STATE,
    "inputs": INPUTS,
    "run": {"id": "r1", "step": 1},
    "result": {"status": 200},
}


def structured(spec: dict[str, Any]) -> StructuredCondition:
    """The structured condition model of `spec`."""
    return StructuredCondition.model_validate(spec)


def holds(cond: str | dict[str, Any], context: dict[str, Any] | None = None) -> bool:
    """Compile `cond` over NS and test it against CONTEXT."""
    parsed = structured(cond) if isinstance(cond, dict) else cond
    result = compile_condition(parsed, NS).holds(CONTEXT if context is None else context)
    assert isinstance(result, bool)
    return result


def compile_error(cond: str | dict[str, Any], names: frozenset[str] = NS) -> ExpressionError:
    """The ExpressionError raised when compiling `cond`."""
    parsed = structured(cond) if isinstance(cond, dict) else cond
    with pytest.raises(ExpressionError) as info:
        compile_condition(parsed, names)
    return info.value


# --- CEL conditions -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cond", "expected"),
    [
        ("result.status == 200", True),
        ("result.status == 404", False),
        ("result.status == 200 && state.n < 3", False),
        ("result.status == 200 && state.n <= 3", True),
        ("state.n > inputs.threshold", True),
        ("state.n < inputs.threshold", False),
        ('"a" in state.tags', True),
        ('"z" in state.tags', False),
        ("size(state.tags) == 2", True),
        ("has(state.meta.k)", True),
        ("has(state.meta.missing)", False),
        ("state.items.exists(i, i.id == 2)", True),
        ("state.items.all(i, i.id > 1)", False),
        ("!state.flag", False),
        ("state.flag", True),
        ("state.off", False),
        ("true", True),
        ("false", False),
    ],
)
def test_cel_condition(cond: str, expected: bool) -> None:
    assert holds(cond) is expected


@pytest.mark.parametrize(
    ("cond", "expected"),
    [
        ("${state.n > 1}", True),
        ("${state.n > 5}", False),
        ("${ result.status == 200 }", True),
        ("${state.flag}", True),
    ],
)
def test_wrapped_condition(cond: str, expected: bool) -> None:
    assert holds(cond) is expected


@pytest.mark.parametrize(
    "cond", ["state.none", "state.missing", "state.meta.nope.deeper", "null", "${state.none}"]
)
def test_null_condition_is_false(cond: str) -> None:
    assert holds(cond) is False


@pytest.mark.parametrize("cond", ["state.n + 1", "state.name", "state.tags", "${state.meta}", "state.zero"])
def test_non_boolean_condition_is_error(cond: str) -> None:
    compiled = compile_condition(cond, NS)
    with pytest.raises(ExpressionError) as info:
        compiled.holds(CONTEXT)
    source = cond.removeprefix("${").removesuffix("}")
    assert f"'{source}'" in str(info.value)
    assert "not a boolean" in str(info.value)


def test_condition_evaluated_against_each_context() -> None:
    compiled = compile_condition("state.n > 1", NS)
    assert compiled.holds({"state": {"n": 2}}) is True
    assert compiled.holds({"state": {"n": 0}}) is False


def test_cel_condition_missing_key_is_error() -> None:
    compiled = compile_condition("state.missing == 1", NS)
    with pytest.raises(ExpressionError) as info:
        compiled.holds(CONTEXT)
    assert "has(" in str(info.value)


def test_cel_condition_syntax_error_at_compile_time() -> None:
    assert "parse" in str(compile_error("state.n >"))


@pytest.mark.parametrize("cond", ["ghost.x == 1", "${ghost}", "ghost.y"])
def test_cel_condition_unknown_namespace_at_compile_time(cond: str) -> None:
    assert "'ghost'" in str(compile_error(cond))


def test_result_unknown_where_not_available() -> None:
    assert "'result'" in str(compile_error("result.status == 200", namespaces.BASE))


# --- structured ops -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"path": "state.n", "op": "eq", "value": 3}, True),
        ({"path": "state.n", "op": "eq", "value": 4}, False),
        ({"path": "state.name", "op": "eq", "value": "report-2024.txt"}, True),
        ({"path": "state.tags", "op": "eq", "value": ["a", "b"]}, True),
        ({"path": "state.meta", "op": "eq", "value": {"k": "other"}}, False),
        ({"path": "state.n", "op": "ne", "value": 4}, True),
        ({"path": "state.n", "op": "ne", "value": 3}, False),
        ({"path": "state.n", "op": "gt", "value": 2}, True),
        ({"path": "state.n", "op": "gt", "value": 3}, False),
        ({"path": "state.n", "op": "gte", "value": 3}, True),
        ({"path": "state.n", "op": "gte", "value": 4}, False),
        ({"path": "state.n", "op": "lt", "value": 4}, True),
        ({"path": "state.n", "op": "lt", "value": 3}, False),
        ({"path": "state.n", "op": "lte", "value": 3}, True),
        ({"path": "state.n", "op": "lte", "value": 2}, False),
        ({"path": "state.ratio", "op": "lt", "value": 1}, True),
        ({"path": "state.name", "op": "gt", "value": "a"}, True),
        ({"path": "state.n", "op": "in", "value": [1, 3]}, True),
        ({"path": "state.n", "op": "in", "value": [1, 2]}, False),
        ({"path": "state.meta.k", "op": "in", "value": "avb"}, True),
        ({"path": "state.n", "op": "not_in", "value": [1, 2]}, True),
        ({"path": "state.n", "op": "not_in", "value": [3]}, False),
        ({"path": "state.tags", "op": "contains", "value": "a"}, True),
        ({"path": "state.tags", "op": "contains", "value": "z"}, False),
        ({"path": "state.name", "op": "contains", "value": "2024"}, True),
        ({"path": "state.name", "op": "contains", "value": "2025"}, False),
        ({"path": "state.meta", "op": "contains", "value": "k"}, True),
        ({"path": "state.meta", "op": "contains", "value": "v"}, False),
        ({"path": "state.name", "op": "matches", "value": r"^report-\d{4}\.txt$"}, True),
        ({"path": "state.name", "op": "matches", "value": r"\d{4}"}, True),
        ({"path": "state.name", "op": "matches", "value": r"^\d"}, False),
        ({"path": "state.n", "op": "exists"}, True),
        ({"path": "state.off", "op": "exists"}, True),
        ({"path": "state.zero", "op": "exists"}, True),
        ({"path": "state.empty", "op": "exists"}, True),
        ({"path": "state.none", "op": "exists"}, False),
        ({"path": "state.missing", "op": "exists"}, False),
        ({"path": "state.items.1.id", "op": "exists"}, True),
        ({"path": "state.items.2.id", "op": "exists"}, False),
        ({"path": "state.flag", "op": "truthy"}, True),
        ({"path": "state.name", "op": "truthy"}, True),
        ({"path": "state.tags", "op": "truthy"}, True),
        ({"path": "state.off", "op": "truthy"}, False),
        ({"path": "state.zero", "op": "truthy"}, False),
        ({"path": "state.empty", "op": "truthy"}, False),
        ({"path": "state.empty_list", "op": "truthy"}, False),
        ({"path": "state.missing", "op": "truthy"}, False),
    ],
)
def test_structured_op(spec: dict[str, Any], expected: bool) -> None:
    assert holds(spec) is expected


@pytest.mark.parametrize(
    "spec",
    [
        {"path": "state.missing", "op": "gt", "value": 1},
        {"path": "state.missing", "op": "gte", "value": 1},
        {"path": "state.missing", "op": "lt", "value": 1},
        {"path": "state.missing", "op": "lte", "value": 1},
        {"path": "state.n", "op": "gt", "value": None},
        {"path": "state.n", "op": "lte", "value": None},
        {"path": "state.none", "op": "lt", "value": None},
        {"path": "state.n", "op": "gt", "value": "1"},
        {"path": "state.n", "op": "lt", "value": "9"},
        {"path": "state.name", "op": "gte", "value": 1},
        {"path": "state.tags", "op": "lt", "value": 5},
        {"path": "state.meta", "op": "gt", "value": {"a": 1}},
        {"path": "state.n", "op": "eq", "value": "3"},
        {"path": "state.n", "op": "eq", "value": None},
        {"path": "state.missing", "op": "eq", "value": 0},
        {"path": "state.n", "op": "in", "value": None},
        {"path": "state.n", "op": "in", "value": 3},
        {"path": "state.n", "op": "in", "value": "3"},
        {"path": "state.tags", "op": "in", "value": {"a": 1}},
        {"path": "state.n", "op": "contains", "value": 3},
        {"path": "state.missing", "op": "contains", "value": "a"},
        {"path": "state.meta", "op": "contains", "value": ["unhashable"]},
        {"path": "state.n", "op": "matches", "value": "3"},
        {"path": "state.missing", "op": "matches", "value": ".*"},
    ],
)
def test_null_or_mismatched_types_are_false(spec: dict[str, Any]) -> None:
    assert holds(spec) is False


def test_eq_null_path_against_null_value() -> None:
    assert holds({"path": "state.none", "op": "eq", "value": None}) is True
    assert holds({"path": "state.missing", "op": "ne", "value": None}) is False


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"path": "state.n", "op": "gt", "value": "${inputs.threshold}"}, True),
        ({"path": "state.n", "op": "gt", "value": "${inputs.high}"}, False),
        ({"path": "state.n", "op": "lt", "value": "${inputs.high}"}, True),
        ({"path": "state.n", "op": "eq", "value": "${inputs.threshold + 1}"}, True),
        ({"path": "state.n", "op": "gt", "value": "${inputs.missing}"}, False),
        ({"path": "state.n", "op": "gt", "value": "${inputs.missing || 1}"}, True),
        ({"path": "state.name", "op": "matches", "value": "${inputs.pattern}"}, True),
        ({"path": "state.name", "op": "eq", "value": "report-${inputs.threshold}024.txt"}, True),
        ({"path": "state.tags.0", "op": "in", "value": "${inputs.wanted}"}, True),
        ({"path": "state.tags.1", "op": "in", "value": "${inputs.wanted}"}, False),
        ({"path": "state.tags", "op": "eq", "value": ["a", "${state.tags.1}"]}, True),
    ],
)
def test_value_is_interpolated(spec: dict[str, Any], expected: bool) -> None:
    assert holds(spec) is expected


def test_interpolated_value_follows_context() -> None:
    compiled = compile_condition(structured({"path": "state.n", "op": "gte", "value": "${inputs.t}"}), NS)
    assert compiled.holds({"state": {"n": 5}, "inputs": {"t": 5}}) is True
    assert compiled.holds({"state": {"n": 5}, "inputs": {"t": 6}}) is False


def test_structured_fallback_path() -> None:
    spec = {"path": "state.missing || state.n", "op": "eq", "value": 3}
    assert holds(spec) is True


@pytest.mark.parametrize(
    "spec",
    [
        {"path": "state.flag", "op": "eq", "value": 1},
        {"path": "state.zero", "op": "eq", "value": False},
        {"path": "state.flag", "op": "in", "value": [1, 2]},
    ],
)
def test_bool_never_equals_number(spec: dict[str, Any]) -> None:
    assert holds(spec) is False


@pytest.mark.parametrize(
    "spec",
    [
        {"path": "state.flag", "op": "gt", "value": 0},
        {"path": "state.off", "op": "lt", "value": 1},
        {"path": "state.n", "op": "gte", "value": True},
    ],
)
def test_bool_against_number_comparison_is_false(spec: dict[str, Any]) -> None:
    assert holds(spec) is False


# --- all / any / not ----------------------------------------------------------------------

TRUE = {"path": "state.flag", "op": "truthy"}
FALSE = {"path": "state.off", "op": "truthy"}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"all": [TRUE, TRUE]}, True),
        ({"all": [TRUE, FALSE]}, False),
        ({"any": [FALSE, TRUE]}, True),
        ({"any": [FALSE, FALSE]}, False),
        ({"not": TRUE}, False),
        ({"not": FALSE}, True),
        ({"all": [TRUE, {"any": [FALSE, {"not": FALSE}]}]}, True),
        ({"all": [TRUE, {"any": [FALSE, {"not": TRUE}]}]}, False),
        ({"not": {"all": [TRUE, FALSE]}}, True),
        ({"not": {"any": [TRUE, FALSE]}}, False),
        ({"all": ["state.n > 1", {"path": "state.tags", "op": "contains", "value": "a"}]}, True),
        ({"any": ["state.n > 5", "${result.status == 404}"]}, False),
        ({"not": "state.n > 5"}, True),
    ],
)
def test_combinations(spec: dict[str, Any], expected: bool) -> None:
    assert holds(spec) is expected


def test_any_short_circuits() -> None:
    # The second member would raise (missing key in CEL); `any` stops at the first true one.
    assert holds({"any": [TRUE, "state.missing == 1"]}) is True
    compiled = compile_condition(structured({"any": [FALSE, "state.missing == 1"]}), NS)
    with pytest.raises(ExpressionError):
        compiled.holds(CONTEXT)


def test_nested_member_unknown_namespace_at_compile_time() -> None:
    err = compile_error({"all": [TRUE, {"not": {"path": "ghost.x", "op": "exists"}}]})
    assert "'ghost'" in str(err)


# --- malformed structured conditions ------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        {"path": "state.n", "op": "eq", "value": 1, "all": [TRUE]},
        {"all": [TRUE], "any": [TRUE]},
        {"any": [TRUE], "not": TRUE},
        {"path": "state.n"},
        {"path": "state.n", "value": 1},
        {},
        {"op": "eq", "value": 1},
        {"path": "state.n", "op": "approx", "value": 1},
        {"path": "state.n", "op": "eq", "extra": 1},
    ],
)
def test_malformed_structured_condition_is_validation_error(spec: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        StructuredCondition.model_validate(spec)


def test_two_forms_message_names_them() -> None:
    with pytest.raises(ValidationError) as info:
        StructuredCondition.model_validate({"path": "state.n", "op": "exists", "any": [TRUE]})
    assert "exactly one" in str(info.value)


def test_missing_op_message_names_path() -> None:
    with pytest.raises(ValidationError) as info:
        StructuredCondition.model_validate({"path": "state.n"})
    assert "no 'op'" in str(info.value)


@pytest.mark.parametrize("pattern", ["(", "[a-", "*x", "a{2,1}"])
def test_invalid_regex_at_compile_time(pattern: str) -> None:
    err = compile_error({"path": "state.name", "op": "matches", "value": pattern})
    assert "regular expression" in str(err)


def test_matches_without_string_pattern_at_compile_time() -> None:
    assert "regular expression" in str(compile_error({"path": "state.name", "op": "matches", "value": 5}))


def test_invalid_interpolated_regex_at_evaluation() -> None:
    compiled = compile_condition(
        structured({"path": "state.name", "op": "matches", "value": "${inputs.re}"}), NS
    )
    with pytest.raises(ExpressionError):
        compiled.holds({"state": {"name": "x"}, "inputs": {"re": "("}})


@pytest.mark.parametrize("path", ["ghost.x", "ghost", "state.n || ghost.y"])
def test_structured_path_unknown_namespace_at_compile_time(path: str) -> None:
    err = compile_error({"path": path, "op": "exists"})
    assert "'ghost'" in str(err)
    assert "unknown namespace" in str(err)


def test_structured_value_unknown_namespace_at_compile_time() -> None:
    assert "'ghost'" in str(compile_error({"path": "state.n", "op": "eq", "value": "${ghost.v}"}))


@pytest.mark.parametrize("path", ["state.n + 1", "size(state.tags)", "state..n"])
def test_structured_path_must_be_a_path(path: str) -> None:
    err = compile_error({"path": path, "op": "exists"})
    assert "path" in str(err)
