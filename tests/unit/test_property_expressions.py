"""Property tests (issue 12): random CEL-ish expressions, templates and conditions against
random contexts (wrong types, huge, deep, NaN, unicode) give a value or an
`ExpressionError`, never another exception. Bounded and reproducible (see strategies.fuzz).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from strategies import (
    CEL,
    CONDITIONS,
    EXPRESSIONS,
    FALLBACKS,
    FRIENDLY,
    HOSTILE,
    JSONISH,
    NAMES,
    STRUCTURED,
    TEMPLATES,
    TEXT,
    TWINS,
    fuzz,
)

from graphrunner.errors import ExpressionError
from graphrunner.expressions import compile_condition, compile_template
from graphrunner.expressions.lint import constant_problems
from graphrunner.model import StructuredCondition

NAMESPACES = frozenset({"state", "inputs", "result", "run", "_now", "_timestamp", "item", "index"})
VALUES = FRIENDLY | HOSTILE
CONTEXTS = st.fixed_dictionaries(
    {
        "state": st.fixed_dictionaries({}, optional={n: VALUES for n in ("x", "n", "items", "a")}) | HOSTILE,
        "inputs": st.fixed_dictionaries({}, optional={n: VALUES for n in ("a", "b", "l")}),
        "result": st.fixed_dictionaries({}, optional={"value": VALUES}) | HOSTILE,
        "run": st.fixed_dictionaries({"id": TEXT, "step": st.integers()}),
        "_now": TEXT,
        "_timestamp": st.integers(),
    },
    optional={"item": VALUES, "index": st.integers(-1, 3)},
)


def evaluate_template(text: Any, context: dict[str, Any]) -> None:
    try:
        template = compile_template(text, NAMESPACES)
    except ExpressionError:
        return
    try:
        template.render(context)
    except ExpressionError as exc:
        assert str(exc)


@fuzz(200)
@given(text=TEMPLATES, context=CONTEXTS)
def test_templates_give_a_value_or_an_expression_error(text: str, context: dict[str, Any]) -> None:
    evaluate_template(text, context)


@fuzz(80)
@given(text=FALLBACKS, context=CONTEXTS)
def test_fallback_chains_with_any_literal(text: str, context: dict[str, Any]) -> None:
    evaluate_template("${" + text + "}", context)
    evaluate_template("at ${" + text + "}", context)


@fuzz(60)
@given(
    value=st.dictionaries(NAMES, TEMPLATES | JSONISH, max_size=3) | st.lists(TEMPLATES, max_size=3),
    context=CONTEXTS,
)
def test_structures_give_a_value_or_an_expression_error(value: Any, context: dict[str, Any]) -> None:
    evaluate_template(value, context)


@fuzz(200)
@given(cond=CONDITIONS, context=CONTEXTS)
def test_conditions_hold_or_raise_an_expression_error(cond: Any, context: dict[str, Any]) -> None:
    try:
        spec = StructuredCondition.model_validate(cond) if isinstance(cond, dict) else cond
        compiled = compile_condition(spec, NAMESPACES)
    except (ValidationError, ExpressionError):  # the loader reports these as invalid graphs
        return
    try:
        assert compiled.holds(context) in (True, False)
    except ExpressionError as exc:
        assert str(exc)


@fuzz(60)
@given(cond=STRUCTURED, context=CONTEXTS)
def test_structured_conditions_on_hostile_values(cond: dict[str, Any], context: dict[str, Any]) -> None:
    test_conditions_hold_or_raise_an_expression_error.hypothesis.inner_test(cond, context)  # type: ignore[attr-defined]


@fuzz(200)
@given(text=CEL | EXPRESSIONS | st.text(max_size=30))
def test_the_constant_scan_never_raises(text: str) -> None:
    for code, message in constant_problems(text):
        assert code in ("constant_division_by_zero", "constant_index_out_of_range") and message


SITES = [
    "${state.x}",
    "x=${state.x}!",
    "${state.x || state.n}",
    "${state.x + state.n}",
    "${state.x / state.n}",
    "${state.x % state.n}",
    "${size(state.x)}",
    "${state.x[0]}",
    "${state.x[state.n]}",
    "${state.x.a}",
    "${string(state.x)}",
    "${state.x == state.n}",
    "${[state.x, state.n]}",
    "${{'k': state.x}}",
    "${state.x.map(v, v)}",
]
WHENS: list[Any] = [
    "state.x",
    "${state.x}",
    "state.x == state.n",
    "state.x > state.n",
    *(
        {"path": "state.x", "op": op, "value": "${state.n}"}
        for op in ("eq", "ne", "gt", "lte", "in", "contains")
    ),
    {"path": "state.x", "op": "matches", "value": "${state.n}"},
]


@fuzz(60)
@given(pair=st.tuples(FRIENDLY | HOSTILE, FRIENDLY | HOSTILE) | TWINS)
def test_every_site_over_any_pair_of_values(pair: tuple[Any, Any]) -> None:
    """Each value reaches text rendering, arithmetic, indexing, comparison and conditions."""
    context = {"state": {"x": pair[0], "n": pair[1]}, "inputs": {}}
    for site in SITES:
        evaluate_template(site, context)
    for when in WHENS:
        test_conditions_hold_or_raise_an_expression_error.hypothesis.inner_test(when, context)  # type: ignore[attr-defined]
