"""Interpolation (DESIGN §2.3): `${path}`, `||` fallbacks, CEL, escapes and the clock namespaces."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from graphrunner import namespaces
from graphrunner.errors import ExpressionError
from graphrunner.expressions import compile_expression, compile_template, render_text
from graphrunner.expressions.cel_expr import CelExpression, to_plain
from graphrunner.expressions.paths import parse_fallback, parse_path, resolve
from graphrunner.expressions.scanner import has_expression, split_template

NS = namespaces.WITH_RESULT
NOW = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
STATE: dict[str, Any] = {
    "n": 3,
    "attempts": 2,
    "ratio": 1.5,
    "flag": True,
    "off": False,
    "zero": 0,
    "empty": "",
    "none": None,
    "name": "Ada",
    "tags": ["a", "b"],
    "nums": [1, 2, 3],
    "items": [{"name": "first", "tags": ["x"]}, {"name": "second"}],
    "meta": {"k": "v", "nested": {"deep": 7}},
    "my-key": "dashed",
}
INPUTS: dict[str, Any] = {"threshold": 2, "b": "from-b", "f": False, "z": 0, "s": ""}


def ctx(**extra: Any) -> dict[str, Any]:
    """An evaluation context over STATE and INPUTS at NOW."""
    return namespaces.context(
        state=STATE, inputs=INPUTS, run={"id": "r1", "graph_id": "g", "step": 4}, now=NOW, **extra
    )


def render(value: Any, context: dict[str, Any] | None = None) -> Any:
    """Compile `value` over NS and render it in `context` (default: ctx())."""
    return compile_template(value, NS).render(ctx() if context is None else context)


def compile_error(value: Any, names: frozenset[str] = NS) -> ExpressionError:
    """The ExpressionError raised when compiling `value`."""
    with pytest.raises(ExpressionError) as info:
        compile_template(value, names)
    return info.value


def render_error(value: Any) -> ExpressionError:
    """The ExpressionError raised when rendering `value` (it must compile)."""
    template = compile_template(value, NS)
    with pytest.raises(ExpressionError) as info:
        template.render(ctx())
    return info.value


# --- whole values keep their type ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${state.n}", 3),
        ("${state.ratio}", 1.5),
        ("${state.flag}", True),
        ("${state.off}", False),
        ("${state.tags}", ["a", "b"]),
        ("${state.meta}", {"k": "v", "nested": {"deep": 7}}),
        ("${state.none}", None),
        ("${state.name}", "Ada"),
    ],
)
def test_whole_value_keeps_type(text: str, expected: Any) -> None:
    value = render(text)
    assert value == expected
    assert type(value) is type(expected)


def test_whole_value_with_spaces_inside_braces_keeps_type() -> None:
    assert render("${  state.n  }") == 3


def test_two_expressions_side_by_side_render_as_text() -> None:
    assert render("${state.n}${state.n}") == "33"


# --- inline text --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("n=${state.n}", "n=3"),
        ("r=${state.ratio}", "r=1.5"),
        ("[${state.none}]", "[]"),
        ("[${state.missing}]", "[]"),
        ("flag=${state.flag}", "flag=true"),
        ("off=${state.off}", "off=false"),
        ("tags=${state.tags}", 'tags=["a","b"]'),
        ("meta=${state.meta}", 'meta={"k":"v","nested":{"deep":7}}'),
        ("hi ${state.name}!", "hi Ada!"),
        ("${state.n} items", "3 items"),
        ("x ${state.n} y ${state.flag} z", "x 3 y true z"),
    ],
)
def test_inline_renders_text(text: str, expected: str) -> None:
    assert render(text) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ""),
        (True, "true"),
        (False, "false"),
        (0, "0"),
        (2.5, "2.5"),
        ("s", "s"),
        ([1, "a", None], '[1,"a",null]'),
        ({"a": [1, {"b": True}]}, '{"a":[1,{"b":true}]}'),
    ],
)
def test_render_text(value: Any, expected: str) -> None:
    assert render_text(value) == expected


def test_whitespace_around_whole_expression_makes_it_text() -> None:
    assert render(" ${state.n}") == " 3"
    assert render("${state.n} ") == "3 "


# --- paths --------------------------------------------------------------------------------


def test_list_index_in_path() -> None:
    assert render("${state.items.0.name}") == "first"
    assert render("${state.items.1.name}") == "second"
    assert render("${state.items.0.tags.0}") == "x"
    assert render("${state.nums.2}") == 3


def test_list_index_out_of_range_is_null() -> None:
    assert render("${state.items.5.name}") is None
    assert render("${state.nums.3}") is None


def test_path_with_dash_segment() -> None:
    assert render("${state.my-key}") == "dashed"


def test_whole_namespace_is_a_path() -> None:
    assert render("${inputs}") == INPUTS


@pytest.mark.parametrize(
    "text",
    [
        "${state.missing}",  # missing key in a namespace
        "${state.meta.missing}",  # missing nested key
        "${state.meta.missing.deeper.still}",  # below a missing key
        "${state.n.0}",  # indexing into a scalar
        "${state.n.x}",  # key of a scalar
        "${state.name.0}",  # a string is not indexed
        "${state.meta.0}",  # a digit segment on a mapping without that key
        "${state.items.name}",  # a name segment on a list
        "${state.none.x}",  # below a null
        "${result.status}",  # a namespace absent from the context
    ],
)
def test_missing_path_is_null_not_error(text: str) -> None:
    assert render(text) is None


def test_missing_path_in_text_is_empty() -> None:
    assert render("<${state.meta.nope.deep}>") == "<>"


def test_parse_path() -> None:
    assert parse_path("state.items.0.name") == ("state", "items", "0", "name")
    assert parse_path(" state.x ") == ("state", "x")
    assert parse_path("state.n + 1") is None
    assert parse_path("size(state.x)") is None
    assert parse_path("true") is None
    assert parse_path("0.state") is None


def test_resolve() -> None:
    data = {"a": [{"b": 1}, {"b": False}], "s": "text"}
    assert resolve(data, ["a", "1", "b"]) is False
    assert resolve(data, ["a", "0", "b"]) == 1
    assert resolve(data, ["a", "2", "b"]) is None
    assert resolve(data, ["s", "0"]) is None
    assert resolve(data, ["nope"]) is None


# --- || fallback --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${inputs.a || inputs.b}", "from-b"),
        ("${inputs.a || state.none || inputs.b}", "from-b"),
        ("${inputs.b || inputs.a}", "from-b"),
        ("${inputs.a || inputs.c}", None),
        ("${inputs.f || inputs.b}", False),
        ("${inputs.z || inputs.b}", 0),
        ("${inputs.s || inputs.b}", ""),
        ("${state.off || true}", False),
        ('${inputs.a || "x"}', "x"),
        ("${inputs.a || 5}", 5),
        ("${inputs.a || -2.5}", -2.5),
        ("${inputs.a || true}", True),
        ("${inputs.a || false}", False),
        ("${inputs.a || null}", None),
        ('${inputs.a || inputs.c || "last"}', "last"),
        ('${inputs.b || "unused"}', "from-b"),
        ('${inputs.a || "a||b"}', "a||b"),
        ("${inputs.a || 'anon'}", "anon"),  # single quotes, as CEL writes strings too
        ("${inputs.a || 'it\\'s \"x\"'}", 'it\'s "x"'),
        ("${inputs.a || 'a||b'}", "a||b"),
        ("${inputs.a||inputs.b}", "from-b"),
        ("${state.items.7.name || state.items.0.name}", "first"),
    ],
)
def test_fallback_first_non_null(text: str, expected: Any) -> None:
    value = render(text)
    assert value == expected
    assert type(value) is type(expected)


def test_fallback_inside_text() -> None:
    assert render('name=${inputs.a || "anon"}; n=${inputs.a || state.n}') == "name=anon; n=3"
    assert render("flag=${inputs.f || true}") == "flag=false"


def test_parse_fallback() -> None:
    chain = parse_fallback('inputs.a || inputs.b || "x"')
    assert chain is not None
    assert chain.roots == {"inputs"}
    assert chain.evaluate({"inputs": {"b": 0}}) == 0
    assert chain.evaluate({"inputs": {}}) == "x"
    assert parse_fallback("state.n + 1") is None
    assert parse_fallback('"x" || "y"') is None


def test_shell_quote_of_a_chain_reads_it_as_a_fallback() -> None:
    assert render("ls ${shell_quote(inputs.a || inputs.b)}") == "ls from-b"
    assert render("ls ${shell_quote(inputs.a || 'a dir')}") == "ls 'a dir'"
    assert render("ls ${shell_quote(state.tags)} ${shell_quote(state.none)}") == "ls a b ''"


def test_fallback_unknown_namespace_is_compile_error() -> None:
    err = compile_error("${inputs.a || bogus.b}")
    assert "bogus" in str(err)


# --- escapes and scanning -----------------------------------------------------------------


def test_escape_writes_literal() -> None:
    assert render("$${state.n}") == "${state.n}"
    assert render("cost: $${not.an.expression}") == "cost: ${not.an.expression}"


def test_escape_next_to_real_expression() -> None:
    assert render("$${state.n} is ${state.n}") == "${state.n} is 3"


def test_split_template() -> None:
    assert split_template("a ${state.n} b") == [(False, "a "), (True, "state.n"), (False, " b")]
    assert split_template("$${x}") == [(False, "${x}")]
    assert split_template("plain") == [(False, "plain")]


def test_has_expression() -> None:
    assert has_expression("x ${state.n}")
    assert not has_expression("x $${state.n}")
    assert not has_expression("no dollar {braces}")
    assert not has_expression("$ {state.n}")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('${ {"a": "}"}["a"] }', "}"),
        ('${ {"a": 1, "b": {"c": 2}}["b"]["c"] }', 2),
        ('${"a}b" + "{"}', "a}b{"),
        ("${'a}' + \"}b\"}", "a}}b"),
        ('${"quote \\" }" + "x"}', 'quote " }x'),
        ('pre ${ {"k": "}}"}["k"] } post', "pre }} post"),
    ],
)
def test_braces_inside_strings_and_maps(text: str, expected: Any) -> None:
    assert render(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "${state.n",
        "before ${state.n and after",
        "${",
        "${}",
        "${   }",
        "x ${} y",
        '${"abc}',
        "${'abc}",
        '${state.name == "unterminated}',
    ],
)
def test_malformed_template_is_expression_error(text: str) -> None:
    err = compile_error(text)
    assert str(err)


def test_unclosed_brace_message() -> None:
    assert "unclosed" in str(compile_error("${state.n"))


def test_empty_expression_message() -> None:
    assert "empty" in str(compile_error("${ }"))


def test_unterminated_string_message() -> None:
    assert "unterminated" in str(compile_error('${"abc}'))


# --- structures ---------------------------------------------------------------------------


def test_nested_structures_are_walked() -> None:
    value = {
        "top": "${state.n}",
        "list": [
            {"inner": "${state.name}", "deep": [{"x": "${state.flag}", "text": "n=${state.n}"}]},
            "${state.tags}",
            42,
        ],
        "plain": "no expression",
    }
    assert render(value) == {
        "top": 3,
        "list": [
            {"inner": "Ada", "deep": [{"x": True, "text": "n=3"}]},
            ["a", "b"],
            42,
        ],
        "plain": "no expression",
    }


def test_non_strings_pass_through() -> None:
    value = {"log": ["x"], "n": 5, "f": 1.5, "b": False, "none": None, "nested": {"l": [1, [2]]}}
    assert render(value) == {
        "log": ["x"],
        "n": 5,
        "f": 1.5,
        "b": False,
        "none": None,
        "nested": {"l": [1, [2]]},
    }
    for scalar in (7, 2.5, True, None):
        assert render(scalar) is scalar or render(scalar) == scalar


def test_tuple_renders_as_list() -> None:
    assert render(("${state.n}", "x")) == [3, "x"]


@pytest.mark.parametrize("text", ["plain", "", "dollar $ and {braces}", "$notanexpr", "{state.n}"])
def test_string_without_expression_unchanged(text: str) -> None:
    assert render(text) == text


def test_template_renders_against_each_context() -> None:
    template = compile_template({"v": "${state.n}", "t": "n=${state.n}"}, NS)
    assert template.render({"state": {"n": 1}}) == {"v": 1, "t": "n=1"}
    assert template.render({"state": {"n": 2}}) == {"v": 2, "t": "n=2"}


# --- CEL ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${state.attempts + 1}", 3),
        ("${state.n * 2 - 1}", 5),
        ("${state.ratio * 2.0}", 3.0),
        ("${size(state.tags)}", 2),
        ("${size(state.name)}", 3),
        ("${state.tags.size()}", 2),
        ('${state.n > 2 ? "big" : "small"}', "big"),
        ('${state.n > 5 ? "big" : "small"}', "small"),
        ('${state.name + "-" + string(state.n)}', "Ada-3"),
        ("${state.n == 3}", True),
        ("${state.n != 3}", False),
        ("${state.n >= inputs.threshold}", True),
        ("${state.n < inputs.threshold}", False),
        ('${state.name == "Ada" && state.flag}', True),
        ('${"a" in state.tags}', True),
        ("${has(state.meta.k)}", True),
        ("${has(state.meta.nope)}", False),
        ('${has(state.nope) ? state.nope : "default"}', "default"),
        ("${state.nums.all(i, i > 0)}", True),
        ("${state.nums.all(i, i > 1)}", False),
        ("${state.nums.exists(v, v == 2)}", True),
        ("${state.nums.exists_one(v, v > 2)}", True),
        ("${state.nums.map(x, x * 2)}", [2, 4, 6]),
        ("${state.nums.filter(x, x % 2 == 1)}", [1, 3]),
        ('${state.items.filter(it, it.name == "second").size()}', 1),
        ("${state.items.map(it, it.name)}", ["first", "second"]),
        ("${state.meta.nested.deep + 1}", 8),
        ("${run.step + 1}", 5),
        ("${[state.n, state.name]}", [3, "Ada"]),
        ('${ {"k": state.n} }', {"k": 3}),
    ],
)
def test_cel_expressions(text: str, expected: Any) -> None:
    value = render(text)
    assert value == expected
    assert type(value) is type(expected)


def test_cel_inside_text() -> None:
    assert render("next=${state.attempts + 1} of ${size(state.tags)}") == "next=3 of 2"
    assert render("ok=${state.n > 1}") == "ok=true"


def test_macro_bound_variable_is_not_a_namespace() -> None:
    names = frozenset({"state"})
    for text in ("state.nums.all(i, i > 0)", "state.nums.map(x, x * 2)", "state.nums.filter(y, y > 1)"):
        expr = CelExpression(text, names)
        assert expr.roots == {"state"}


def test_int_plus_double_is_evaluation_error() -> None:
    template = compile_template("${state.n + 1.5}", NS)  # compiles: CEL does not coerce at runtime
    with pytest.raises(ExpressionError) as info:
        template.render(ctx())
    message = str(info.value)
    assert "state.n + 1.5" in message
    assert "overload" in message.lower()
    assert info.value.expression == "state.n + 1.5"


def test_explicit_conversion_mixes_int_and_double() -> None:
    assert render("${double(state.n) + 1.5}") == 4.5


def test_cel_missing_key_mentions_has() -> None:
    err = render_error("${state.meta.nope + 1}")
    assert "has(" in str(err)
    assert "state.meta.nope + 1" in str(err)


def test_cel_missing_key_inside_text_is_error() -> None:
    err = render_error("value: ${state.nope.deeper == 1}")
    assert "has(" in str(err)


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("${bogus.x}", "bogus"),
        ("${bogus}", "bogus"),
        ("${bogus.x + 1}", "bogus"),
        ("${size(bogus)}", "bogus"),
        ("text ${other.y} text", "other"),
        ("${state.n + ghost.z}", "ghost"),
        ("${state.nums.map(x, x + ghost)}", "ghost"),
    ],
)
def test_unknown_namespace_is_compile_error(text: str, name: str) -> None:
    err = compile_error(text)
    assert repr(name) in str(err)
    assert "unknown namespace" in str(err)


def test_result_is_unknown_where_not_available() -> None:
    err = compile_error("${result.status == 200}", namespaces.BASE)
    assert "'result'" in str(err)
    assert render("${result.status == 200}", ctx(result={"status": 200})) is True


def test_foreach_variable_known_when_declared() -> None:
    names = namespaces.for_params("url")
    template = compile_template("${url}#${index}", names)
    assert template.render({"url": "http://x", "index": 2}) == "http://x#2"
    assert "'url'" in str(compile_error("${url}", namespaces.BASE))


@pytest.mark.parametrize(
    "text",
    ["${state.n +}", "${state.n ==}", "${(state.n}", "${state.n ? 1}", "${1 +* 2}", "${state..n}"],
)
def test_syntax_error_is_compile_error(text: str) -> None:
    err = compile_error(text)
    assert "parse" in str(err)


def test_compile_expression_chooses_path_or_cel() -> None:
    assert compile_expression("state.items.0.name", NS).evaluate(ctx()) == "first"
    assert isinstance(compile_expression("state.n + 1", NS), CelExpression)
    assert not isinstance(compile_expression("state.n", NS), CelExpression)


# --- to_plain, _now, _timestamp -----------------------------------------------------------


def test_to_plain_timestamp_and_duration() -> None:
    stamp = to_plain(datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC))
    assert isinstance(stamp, str)
    assert datetime.fromisoformat(stamp) == datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
    assert to_plain(timedelta(minutes=1, seconds=30)) == 90.0
    nested = to_plain({"at": [datetime(2024, 1, 1, tzinfo=UTC)], "d": timedelta(seconds=2)})
    assert datetime.fromisoformat(nested["at"][0]) == datetime(2024, 1, 1, tzinfo=UTC)
    assert nested["d"] == 2.0
    assert to_plain(b"bytes") == "bytes"
    assert to_plain((1, 2)) == [1, 2]


def test_cel_timestamp_and_duration_become_plain() -> None:
    stamp = render('${timestamp("2024-01-01T00:00:00Z")}')
    assert isinstance(stamp, str)
    assert datetime.fromisoformat(stamp) == datetime(2024, 1, 1, tzinfo=UTC)
    assert render('${duration("90s")}') == 90.0
    later = render('${timestamp("2024-01-01T00:00:00Z") + duration("1h")}')
    assert datetime.fromisoformat(later) == datetime(2024, 1, 1, 1, tzinfo=UTC)


def test_now_is_iso_utc_with_z() -> None:
    now = render("${_now}")
    assert now == "2024-01-02T03:04:05Z"
    assert now.endswith("Z")
    assert datetime.fromisoformat(now) == NOW


def test_now_converts_other_zones_to_utc() -> None:
    plus_two = datetime(2024, 1, 2, 5, 4, 5, tzinfo=timezone(timedelta(hours=2)))
    context = namespaces.context(state={}, inputs={}, run={}, now=plus_two)
    assert render("${_now}", context) == "2024-01-02T03:04:05Z"
    assert render("${_timestamp}", context) == 1704164645000


def test_timestamp_is_epoch_milliseconds() -> None:
    stamp = render("${_timestamp}")
    assert stamp == 1704164645000
    assert type(stamp) is int
    assert stamp == int(NOW.timestamp() * 1000)


def test_timestamp_keeps_milliseconds() -> None:
    context = namespaces.context(
        state={}, inputs={}, run={}, now=datetime(2024, 1, 2, 3, 4, 5, 123000, tzinfo=UTC)
    )
    assert render("${_timestamp}", context) == 1704164645123


def test_clock_values_in_cel_and_text() -> None:
    assert render("${_timestamp + 1000}") == 1704164646000
    assert render("at ${_now}") == "at 2024-01-02T03:04:05Z"
