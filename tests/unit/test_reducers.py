"""Reducers (DESIGN §2.4, OpenArmature table): semantics, input errors, configuration, merging."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import reducer_targets

from graphrunner.errors import GraphrunnerError, ReducerError
from graphrunner.model.state import ReducerRef
from graphrunner.reducers import (
    CANONICAL,
    ReducerConfigError,
    ReducerInputError,
    Reducers,
    build_reducer,
)

MOD = reducer_targets.__name__
ReducerFn = Callable[[Any, Any], Any]


def reducer(name: str, **params: Any) -> ReducerFn:
    """The reducer function named `name` with `params`."""
    return build_reducer(ReducerRef(name=name, params=params))


def apply_all(fn: ReducerFn, default: Any, *updates: Any) -> Any:
    """Fold `updates` into `default` through `fn`, one update after another."""
    value = default
    for update in updates:
        value = fn(value, update)
    return value


def config_error(name: str, **params: Any) -> ReducerConfigError:
    """The ReducerConfigError raised when building `name` with `params`."""
    with pytest.raises(ReducerConfigError) as info:
        reducer(name, **params)
    return info.value


# --- OpenArmature fixtures 3, 4, 5 ----------------------------------------------------------


def test_fixture_3_last_write_wins_second_write_stays() -> None:
    assert apply_all(reducer("last_write_wins"), None, "first", "second") == "second"


def test_fixture_4_append() -> None:
    fn = reducer("append")
    assert apply_all(fn, ["seed"], ["x", "y"], ["z"]) == ["seed", "x", "y", "z"]


def test_fixture_5_merge() -> None:
    fn = reducer("merge")
    result = apply_all(
        fn,
        {"source": "seed"},
        {"author": "alice", "stage": "draft"},
        {"stage": "final", "reviewer": "bob"},
    )
    assert result == {"source": "seed", "author": "alice", "stage": "final", "reviewer": "bob"}


# --- last_write_wins ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prior", "update"),
    [(1, 2), ("a", None), (None, [1]), ([1, 2], {"k": 1}), ({"a": 1}, "text"), (True, False)],
)
def test_last_write_wins_any_shape(prior: Any, update: Any) -> None:
    assert reducer("last_write_wins")(prior, update) == update


def test_last_write_wins_update_of_null_replaces() -> None:
    assert reducer("last_write_wins")("old", None) is None


# --- append ---------------------------------------------------------------------------------


def test_append_concatenates() -> None:
    assert reducer("append")([1, 2], [3, [4]]) == [1, 2, 3, [4]]


def test_append_keeps_duplicates_and_order() -> None:
    assert reducer("append")(["a", "b"], ["b", "a"]) == ["a", "b", "b", "a"]


@pytest.mark.parametrize("update", ["xy", {"k": 1}, 5, None, True])
def test_append_non_list_update_is_error(update: Any) -> None:
    with pytest.raises(ReducerInputError):
        reducer("append")(["a"], update)


@pytest.mark.parametrize("prior", ["ab", {"k": 1}, 3])
def test_append_non_list_prior_is_error(prior: Any) -> None:
    with pytest.raises(ReducerInputError):
        reducer("append")(prior, ["x"])


# --- merge ----------------------------------------------------------------------------------


def test_merge_is_shallow() -> None:
    prior = {"a": {"x": 1, "y": 2}, "b": 1}
    assert reducer("merge")(prior, {"a": {"x": 9}}) == {"a": {"x": 9}, "b": 1}


def test_merge_update_keys_win_and_order_kept() -> None:
    result = reducer("merge")({"a": 1, "b": 2}, {"b": 3, "c": 4})
    assert result == {"a": 1, "b": 3, "c": 4}
    assert list(result) == ["a", "b", "c"]


def test_merge_null_value_overwrites() -> None:
    assert reducer("merge")({"a": 1}, {"a": None}) == {"a": None}


@pytest.mark.parametrize("update", [[("a", 1)], ["a"], "a=1", 1, None])
def test_merge_non_mapping_update_is_error(update: Any) -> None:
    with pytest.raises(ReducerInputError):
        reducer("merge")({"a": 1}, update)


@pytest.mark.parametrize("prior", [["a"], "text", 1])
def test_merge_non_mapping_prior_is_error(prior: Any) -> None:
    with pytest.raises(ReducerInputError):
        reducer("merge")(prior, {"a": 1})


# --- concat_flatten -------------------------------------------------------------------------


def test_concat_flatten_flattens_one_level() -> None:
    assert reducer("concat_flatten")([0], [[1, 2], [], [3, [4, 5]]]) == [0, 1, 2, 3, [4, 5]]


@pytest.mark.parametrize("update", [[[1], 2], [[1], "ab"], [{"a": 1}], [None]])
def test_concat_flatten_element_not_list_is_error(update: Any) -> None:
    with pytest.raises(ReducerInputError):
        reducer("concat_flatten")([], update)


@pytest.mark.parametrize("update", [{"a": [1]}, "ab", 3, None])
def test_concat_flatten_update_not_list_is_error(update: Any) -> None:
    with pytest.raises(ReducerInputError):
        reducer("concat_flatten")([], update)


def test_concat_flatten_prior_not_list_is_error() -> None:
    with pytest.raises(ReducerInputError):
        reducer("concat_flatten")({"a": 1}, [[1]])


# --- merge_all ------------------------------------------------------------------------------


def test_merge_all_merges_in_order() -> None:
    result = reducer("merge_all")({"a": 0, "keep": True}, [{"a": 1, "b": 1}, {"b": 2}, {"c": 3}])
    assert result == {"a": 1, "b": 2, "c": 3, "keep": True}


def test_merge_all_is_shallow() -> None:
    assert reducer("merge_all")({"n": {"x": 1}}, [{"n": {"y": 2}}]) == {"n": {"y": 2}}


@pytest.mark.parametrize("update", [{"a": 1}, "ab", 1, None])
def test_merge_all_update_not_list_is_error(update: Any) -> None:
    with pytest.raises(ReducerInputError):
        reducer("merge_all")({}, update)


@pytest.mark.parametrize("update", [[{"a": 1}, ["b", 2]], ["ab"], [None], [[("a", 1)]]])
def test_merge_all_element_not_mapping_is_error(update: Any) -> None:
    with pytest.raises(ReducerInputError):
        reducer("merge_all")({}, update)


def test_merge_all_prior_not_mapping_is_error() -> None:
    with pytest.raises(ReducerInputError):
        reducer("merge_all")(["a"], [{"a": 1}])


# --- bounded_append -------------------------------------------------------------------------


def test_bounded_append_drops_from_front() -> None:
    fn = reducer("bounded_append", max_len=3)
    assert fn([1, 2], [3, 4]) == [2, 3, 4]
    assert fn([1, 2, 3], [4]) == [2, 3, 4]


def test_bounded_append_under_limit_keeps_all() -> None:
    fn = reducer("bounded_append", max_len=5)
    assert fn([1], [2, 3]) == [1, 2, 3]
    assert fn([1, 2], [3, 4, 5]) == [1, 2, 3, 4, 5]


def test_bounded_append_update_longer_than_limit() -> None:
    assert reducer("bounded_append", max_len=2)([1], [2, 3, 4, 5]) == [4, 5]


def test_bounded_append_max_len_one() -> None:
    fn = reducer("bounded_append", max_len=1)
    assert apply_all(fn, [], ["a"], ["b", "c"], ["d"]) == ["d"]


@pytest.mark.parametrize("update", ["ab", {"a": 1}, None])
def test_bounded_append_non_list_update_is_error(update: Any) -> None:
    with pytest.raises(ReducerInputError):
        reducer("bounded_append", max_len=3)([], update)


# --- dedupe_append --------------------------------------------------------------------------


def test_dedupe_append_skips_seen_items() -> None:
    assert reducer("dedupe_append")(["a", "b"], ["b", "c", "a", "d"]) == ["a", "b", "c", "d"]


def test_dedupe_append_first_wins_within_update() -> None:
    assert reducer("dedupe_append")([], ["x", "y", "x", "z", "y"]) == ["x", "y", "z"]


def test_dedupe_append_keeps_prior_as_is() -> None:
    assert reducer("dedupe_append")([1, 1], [1, 2, 2]) == [1, 1, 2]


def test_dedupe_append_hashable_composites() -> None:
    assert reducer("dedupe_append")([(1, 2)], [(1, 2), (2, 1)]) == [(1, 2), (2, 1)]


def test_dedupe_append_with_key_first_wins() -> None:
    fn = reducer("dedupe_append", key="id")
    prior = [{"id": 1, "v": "old"}]
    update = [{"id": 1, "v": "new"}, {"id": 2, "v": "first"}, {"id": 2, "v": "second"}, {"id": 3}]
    assert fn(prior, update) == [{"id": 1, "v": "old"}, {"id": 2, "v": "first"}, {"id": 3}]


def test_dedupe_append_with_dotted_key() -> None:
    fn = reducer("dedupe_append", key="meta.url")
    prior = [{"meta": {"url": "a"}, "n": 1}]
    update = [{"meta": {"url": "a"}, "n": 2}, {"meta": {"url": "b"}, "n": 3}, {"meta": {"url": "b"}, "n": 4}]
    assert fn(prior, update) == [{"meta": {"url": "a"}, "n": 1}, {"meta": {"url": "b"}, "n": 3}]


def test_dedupe_append_key_false_and_zero_are_keys() -> None:
    fn = reducer("dedupe_append", key="k")
    assert fn([], [{"k": 0}, {"k": ""}, {"k": 0, "dup": True}]) == [{"k": 0}, {"k": ""}]


@pytest.mark.parametrize("update", [[["unhashable"]], [{"a": 1}], [1, {2}]])
def test_dedupe_append_unhashable_item_is_error(update: Any) -> None:
    with pytest.raises(ReducerInputError, match="hashable"):
        reducer("dedupe_append")([1], update)


def test_dedupe_append_unhashable_key_is_error() -> None:
    with pytest.raises(ReducerInputError, match="hashable"):
        reducer("dedupe_append", key="id")([], [{"id": [1, 2]}])


@pytest.mark.parametrize("update", [[{"other": 1}], ["not-a-record"]])
def test_dedupe_append_with_key_needs_records_with_key(update: Any) -> None:
    with pytest.raises(ReducerInputError):
        reducer("dedupe_append", key="id")([], update)


@pytest.mark.parametrize("update", ["ab", {"id": 1}, None])
def test_dedupe_append_non_list_update_is_error(update: Any) -> None:
    with pytest.raises(ReducerInputError):
        reducer("dedupe_append")([], update)


# --- merge_by_key ---------------------------------------------------------------------------


def test_merge_by_key_replaces_in_place_and_appends_new() -> None:
    fn = reducer("merge_by_key", key="id")
    prior = [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    update = [{"id": 3, "v": "c"}, {"id": 1, "v": "A"}, {"id": 4, "v": "d"}]
    assert fn(prior, update) == [
        {"id": 1, "v": "A"},
        {"id": 2, "v": "b"},
        {"id": 3, "v": "c"},
        {"id": 4, "v": "d"},
    ]


def test_merge_by_key_replaces_whole_record() -> None:
    fn = reducer("merge_by_key", key="id")
    assert fn([{"id": 1, "old": True}], [{"id": 1, "new": True}]) == [{"id": 1, "new": True}]


def test_merge_by_key_replaces_last_prior_record_with_key() -> None:
    fn = reducer("merge_by_key", key="id")
    prior = [{"id": 1, "v": "first"}, {"id": 2}, {"id": 1, "v": "second"}, {"id": 3}]
    result = fn(prior, [{"id": 1, "v": "new"}])
    assert result == [{"id": 1, "v": "first"}, {"id": 2}, {"id": 1, "v": "new"}, {"id": 3}]


def test_merge_by_key_within_update_last_wins() -> None:
    fn = reducer("merge_by_key", key="id")
    prior = [{"id": 1, "v": "a"}]
    update = [{"id": 1, "v": "x"}, {"id": 2, "v": "p"}, {"id": 1, "v": "y"}, {"id": 2, "v": "q"}]
    assert fn(prior, update) == [{"id": 1, "v": "y"}, {"id": 2, "v": "q"}]


def test_merge_by_key_new_keys_appended_in_order() -> None:
    fn = reducer("merge_by_key", key="id")
    assert fn([], [{"id": "c"}, {"id": "a"}, {"id": "b"}]) == [{"id": "c"}, {"id": "a"}, {"id": "b"}]


def test_merge_by_key_dotted_key() -> None:
    fn = reducer("merge_by_key", key="ref.id")
    prior = [{"ref": {"id": 1}, "v": 1}, {"ref": {"id": 2}, "v": 2}]
    result = fn(prior, [{"ref": {"id": 2}, "v": 20}, {"ref": {"id": 3}, "v": 30}])
    assert result == [{"ref": {"id": 1}, "v": 1}, {"ref": {"id": 2}, "v": 20}, {"ref": {"id": 3}, "v": 30}]


@pytest.mark.parametrize("bad", [[1, 2], {"a": 1}, {3}])
def test_merge_by_key_unhashable_key_is_error(bad: Any) -> None:
    with pytest.raises(ReducerInputError, match="hashable"):
        reducer("merge_by_key", key="id")([{"id": 1}], [{"id": bad}])


@pytest.mark.parametrize("record", [{"other": 1}, {"id": None}, {"ref": {}}])
def test_merge_by_key_record_missing_key_is_error(record: dict[str, Any]) -> None:
    with pytest.raises(ReducerInputError, match="key"):
        reducer("merge_by_key", key="id")([{"id": 1}], [record])


def test_merge_by_key_dotted_key_missing_is_error() -> None:
    with pytest.raises(ReducerInputError):
        reducer("merge_by_key", key="ref.id")([], [{"ref": {"other": 1}}])


def test_merge_by_key_record_not_mapping_is_error() -> None:
    with pytest.raises(ReducerInputError):
        reducer("merge_by_key", key="id")([], ["plain"])


@pytest.mark.parametrize("update", [{"id": 1}, "ab", None])
def test_merge_by_key_non_list_update_is_error(update: Any) -> None:
    with pytest.raises(ReducerInputError):
        reducer("merge_by_key", key="id")([], update)


# --- shared rules: empty update, null prior, no mutation -------------------------------------

LIST_AND_MAPPING_CASES: list[tuple[str, dict[str, Any], Any, Any]] = [
    # (name, params, a non-empty prior, the empty update)
    ("append", {}, [1, 2], []),
    ("merge", {}, {"a": 1}, {}),
    ("concat_flatten", {}, [1, 2], []),
    ("merge_all", {}, {"a": 1}, []),
    ("bounded_append", {"max_len": 3}, [1, 2], []),
    ("dedupe_append", {}, [1, 2], []),
    ("dedupe_append", {"key": "id"}, [{"id": 1}, {"id": 2}], []),
    ("merge_by_key", {"key": "id"}, [{"id": 1}, {"id": 2}], []),
]
CASE_IDS = [
    f"{name}{'-' + '-'.join(params) if params else ''}" for name, params, _, _ in LIST_AND_MAPPING_CASES
]


@pytest.mark.parametrize(("name", "params", "prior", "empty"), LIST_AND_MAPPING_CASES, ids=CASE_IDS)
def test_empty_update_is_noop(name: str, params: dict[str, Any], prior: Any, empty: Any) -> None:
    snapshot = copy.deepcopy(prior)
    assert reducer(name, **params)(prior, empty) == snapshot


@pytest.mark.parametrize(("name", "params", "prior", "empty"), LIST_AND_MAPPING_CASES, ids=CASE_IDS)
def test_empty_update_on_null_prior_gives_empty(
    name: str, params: dict[str, Any], prior: Any, empty: Any
) -> None:
    result = reducer(name, **params)(None, empty)
    assert result == type(prior)()
    assert result is not None


@pytest.mark.parametrize(
    ("name", "params", "prior"),
    [
        ("dedupe_append", {}, [{"unhashable": "dict"}]),
        ("merge_by_key", {"key": "id"}, [{"no_id": 1}]),
    ],
)
def test_empty_update_is_noop_whatever_the_prior_holds(name: str, params: dict[str, Any], prior: Any) -> None:
    assert reducer(name, **params)(prior, []) == prior


@pytest.mark.parametrize(
    ("name", "params", "update", "expected"),
    [
        ("append", {}, ["x"], ["x"]),
        ("merge", {}, {"a": 1}, {"a": 1}),
        ("concat_flatten", {}, [["x"], ["y"]], ["x", "y"]),
        ("merge_all", {}, [{"a": 1}, {"b": 2}], {"a": 1, "b": 2}),
        ("bounded_append", {"max_len": 2}, [1, 2, 3], [2, 3]),
        ("dedupe_append", {}, ["x", "x"], ["x"]),
        ("dedupe_append", {"key": "id"}, [{"id": 1}, {"id": 1, "v": 2}], [{"id": 1}]),
        ("merge_by_key", {"key": "id"}, [{"id": 1}, {"id": 1, "v": 2}], [{"id": 1, "v": 2}]),
    ],
)
def test_null_prior_is_empty(name: str, params: dict[str, Any], update: Any, expected: Any) -> None:
    assert reducer(name, **params)(None, update) == expected


MUTATION_CASES: list[tuple[str, dict[str, Any], Any, Any]] = [
    ("last_write_wins", {}, {"a": [1]}, {"b": [2]}),
    ("append", {}, [[1], {"a": 1}], [[2], {"b": 2}]),
    ("merge", {}, {"a": {"x": 1}, "b": [1]}, {"a": {"y": 2}, "c": [3]}),
    ("concat_flatten", {}, [[0]], [[1, 2], [3]]),
    ("merge_all", {}, {"a": {"x": 1}}, [{"a": {"y": 2}}, {"b": 1}]),
    ("bounded_append", {"max_len": 2}, [{"n": 1}, {"n": 2}], [{"n": 3}]),
    ("dedupe_append", {}, ["a", "b"], ["b", "c"]),
    ("dedupe_append", {"key": "id"}, [{"id": 1, "v": [1]}], [{"id": 1, "v": [9]}, {"id": 2, "v": [2]}]),
    ("merge_by_key", {"key": "id"}, [{"id": 1, "v": [1]}, {"id": 2}], [{"id": 1, "v": [9]}, {"id": 3}]),
]


@pytest.mark.parametrize(
    ("name", "params", "prior", "update"),
    MUTATION_CASES,
    ids=[f"{name}{'-' + '-'.join(params) if params else ''}" for name, params, _, _ in MUTATION_CASES],
)
def test_inputs_are_never_mutated(name: str, params: dict[str, Any], prior: Any, update: Any) -> None:
    prior_before, update_before = copy.deepcopy(prior), copy.deepcopy(update)
    result = reducer(name, **params)(prior, update)
    assert prior == prior_before
    assert update == update_before
    if name != "last_write_wins":
        assert result is not prior
        assert result is not update


def test_result_can_be_changed_without_touching_prior() -> None:
    prior = [1, 2]
    result = reducer("append")(prior, [])
    result.append(3)
    assert prior == [1, 2]
    mapping = {"a": 1}
    merged = reducer("merge")(mapping, {})
    merged["b"] = 2
    assert mapping == {"a": 1}


# --- configuration --------------------------------------------------------------------------


@pytest.mark.parametrize("max_len", [0, -1, "5", None, 2.5, True])
def test_bounded_append_bad_max_len(max_len: Any) -> None:
    err = config_error("bounded_append", max_len=max_len)
    assert "max_len" in str(err)


def test_bounded_append_missing_max_len() -> None:
    assert "max_len" in str(config_error("bounded_append"))


@pytest.mark.parametrize("params", [{}, {"key": ""}, {"key": None}, {"key": 5}])
def test_merge_by_key_needs_key(params: dict[str, Any]) -> None:
    assert "key" in str(config_error("merge_by_key", **params))


@pytest.mark.parametrize("key", ["", 3, ["id"]])
def test_dedupe_append_bad_key(key: Any) -> None:
    assert "key" in str(config_error("dedupe_append", key=key))


@pytest.mark.parametrize(
    ("name", "params", "unknown"),
    [
        ("last_write_wins", {"x": 1}, "x"),
        ("append", {"max_len": 3}, "max_len"),
        ("merge", {"deep": True}, "deep"),
        ("concat_flatten", {"key": "id"}, "key"),
        ("merge_all", {"depth": 1}, "depth"),
        ("bounded_append", {"max_len": 3, "key": "id"}, "key"),
        ("dedupe_append", {"max_len": 3}, "max_len"),
        ("merge_by_key", {"key": "id", "mode": "deep"}, "mode"),
    ],
)
def test_unknown_parameter_is_config_error(name: str, params: dict[str, Any], unknown: str) -> None:
    assert repr(unknown) in str(config_error(name, **params))


def test_unknown_parameter_message_names_it() -> None:
    assert "'colour'" in str(config_error("append", colour="red"))


@pytest.mark.parametrize("name", ["appendd", "Append", "last-write-wins", "deep_merge", "pkg.module.fn"])
def test_unknown_reducer_lists_canonical_names(name: str) -> None:
    message = str(config_error(name))
    assert repr(name) in message
    for canonical in CANONICAL:
        assert canonical in message


def test_canonical_names_are_the_eight() -> None:
    assert set(CANONICAL) == {
        "last_write_wins",
        "append",
        "merge",
        "concat_flatten",
        "merge_all",
        "bounded_append",
        "dedupe_append",
        "merge_by_key",
    }


def test_custom_reducer_is_imported() -> None:
    fn = reducer(f"{MOD}:keep_max")
    assert fn is reducer_targets.keep_max
    assert apply_all(fn, None, 3, 1, 7, 2) == 7


def test_custom_reducer_in_merge() -> None:
    reducers = Reducers({"tags": reducer(f"{MOD}:sorted_union")}, {"tags": f"{MOD}:sorted_union"})
    prior = {"tags": ["b", "a"]}
    assert reducers.merge(prior, {"tags": ["c", "a"]}, "n") == {"tags": ["a", "b", "c"]}
    assert prior == {"tags": ["b", "a"]}


@pytest.mark.parametrize(
    "ref",
    [
        f"{MOD}:does_not_exist",
        f"{MOD}:NOT_CALLABLE",
        "no_such_package_xyz.module:fn",
        "no_such_module_xyz:fn",
        f"{MOD}:",
        ":fn",
        "bad module:fn",
    ],
)
def test_non_importable_custom_reducer(ref: str) -> None:
    err = config_error(ref)
    assert str(err)
    assert not isinstance(err, ImportError)


def test_non_importable_custom_reducer_message_names_module() -> None:
    assert "no_such_module_xyz" in str(config_error("no_such_module_xyz:fn"))


def test_custom_reducer_takes_no_parameters() -> None:
    assert "no parameters" in str(config_error(f"{MOD}:keep_max", limit=3))


# --- Reducers.merge -------------------------------------------------------------------------


def make_reducers() -> Reducers:
    """log: append, meta: merge, recent: bounded_append(2); everything else last_write_wins."""
    return Reducers(
        functions={
            "log": reducer("append"),
            "meta": reducer("merge"),
            "recent": reducer("bounded_append", max_len=2),
        },
        names={"log": "append", "meta": "merge", "recent": "bounded_append"},
    )


def test_merge_field_by_field() -> None:
    state = {"log": ["a"], "meta": {"k": 1}, "recent": [1, 2], "title": "old", "untouched": True}
    update = {"log": ["b"], "meta": {"j": 2}, "recent": [3], "title": "new"}
    merged = make_reducers().merge(state, update, "writer")
    assert merged == {
        "log": ["a", "b"],
        "meta": {"k": 1, "j": 2},
        "recent": [2, 3],
        "title": "new",
        "untouched": True,
    }
    assert state == {"log": ["a"], "meta": {"k": 1}, "recent": [1, 2], "title": "old", "untouched": True}


def test_merge_undeclared_fields_use_last_write_wins() -> None:
    reducers = make_reducers()
    merged = reducers.merge({"x": [1], "log": []}, {"x": [2], "fresh": {"a": 1}}, "n")
    assert merged == {"x": [2], "log": [], "fresh": {"a": 1}}
    assert reducers.name_of("x") == "last_write_wins"
    assert reducers.name_of("log") == "append"


def test_merge_declared_field_absent_from_state() -> None:
    assert make_reducers().merge({}, {"log": ["a"], "meta": {"k": 1}}, "n") == {
        "log": ["a"],
        "meta": {"k": 1},
    }


def test_merge_empty_update_keeps_state() -> None:
    state = {"log": ["a"], "x": 1}
    merged = make_reducers().merge(state, {}, "n")
    assert merged == state
    assert merged is not state


def test_merge_failure_is_reducer_error() -> None:
    state = {"log": ["a"], "meta": {"k": 1}}
    with pytest.raises(ReducerError) as info:
        make_reducers().merge(state, {"log": "not-a-list"}, "collector")
    err = info.value
    assert err.field == "log"
    assert err.reducer == "append"
    assert err.node == "collector"
    assert err.category == "reducer_error"
    message = str(err)
    assert "'log'" in message
    assert "'append'" in message
    assert "'collector'" in message
    assert isinstance(err.__cause__, ReducerInputError)
    assert isinstance(err, GraphrunnerError)


def test_merge_failure_carries_pre_merge_state() -> None:
    state = {"log": ["a"], "meta": {"k": 1}, "title": "old"}
    before = copy.deepcopy(state)
    update = {"title": "new", "meta": {"j": 2}, "log": {"not": "a list"}}
    with pytest.raises(ReducerError) as info:
        make_reducers().merge(state, update, "n1")
    assert info.value.state == before
    assert info.value.field == "log"
    assert state == before


def test_merge_failure_of_mapping_reducer() -> None:
    with pytest.raises(ReducerError) as info:
        make_reducers().merge({"meta": {}}, {"meta": ["k", "v"]}, "mapper")
    assert (info.value.field, info.value.reducer, info.value.node) == ("meta", "merge", "mapper")
    assert isinstance(info.value.__cause__, ReducerInputError)


def test_merge_failure_of_custom_reducer_keeps_its_exception() -> None:
    ref = f"{MOD}:keep_max"
    reducers = Reducers({"best": reducer(ref)}, {"best": ref})
    with pytest.raises(ReducerError) as info:
        reducers.merge({"best": 3}, {"best": "text"}, "scorer")
    assert info.value.reducer == ref
    assert info.value.field == "best"
    assert isinstance(info.value.__cause__, TypeError)
    assert info.value.state == {"best": 3}


def test_merge_with_no_declared_fields() -> None:
    assert Reducers().merge({"a": 1}, {"a": [2], "b": None}, None) == {"a": [2], "b": None}


def test_true_and_one_are_different_keys() -> None:
    from graphrunner.reducers import dedupe_append, merge_by_key

    assert dedupe_append()([1], [True, 1, 0, False]) == [1, True, 0, False]
    merged = merge_by_key(key="id")([{"id": 1, "v": "int"}], [{"id": True, "v": "bool"}])
    assert merged == [{"id": 1, "v": "int"}, {"id": True, "v": "bool"}]
