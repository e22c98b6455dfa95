"""The eight canonical reducers (OpenArmature semantics), custom reducers, and merging.

A reducer takes `(prior, update)` and returns the merged value without mutating either.
Wrong input raises `ReducerInputError`; `merge_update` turns it into a `ReducerError`
naming field, reducer and node, with the pre-merge state attached.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from graphrunner.errors import ReducerError
from graphrunner.expressions.paths import resolve
from graphrunner.importing import ImportFailed, import_callable
from graphrunner.model.state import ReducerRef

ReducerFn = Callable[[Any, Any], Any]


class ReducerInputError(ValueError):
    """A reducer was given an update (or prior) of the wrong shape."""


class ReducerConfigError(ValueError):
    """A reducer's parameters are invalid (`reducer_configuration_invalid`)."""


def _need_list(value: Any, what: str) -> list[Any]:
    if value is None and what == "prior":
        return []
    if not isinstance(value, list | tuple):
        raise ReducerInputError(f"{what} must be a list, got {type(value).__name__}")
    return list(value)


def _need_mapping(value: Any, what: str) -> dict[str, Any]:
    if value is None and what == "prior":
        return {}
    if not isinstance(value, Mapping):
        raise ReducerInputError(f"{what} must be a mapping, got {type(value).__name__}")
    return dict(value)


def last_write_wins(prior: Any, update: Any) -> Any:
    """The update replaces the prior value."""
    return update


def append(prior: Any, update: Any) -> list[Any]:
    """prior + update; the update must be a list."""
    return _need_list(prior, "prior") + _need_list(update, "update")


def merge(prior: Any, update: Any) -> dict[str, Any]:
    """Shallow merge of mappings; the update's keys win."""
    return {**_need_mapping(prior, "prior"), **_need_mapping(update, "update")}


def concat_flatten(prior: Any, update: Any) -> list[Any]:
    """prior + the update's lists flattened one level; every element must be a list."""
    out = _need_list(prior, "prior")
    for i, element in enumerate(_need_list(update, "update")):
        if not isinstance(element, list | tuple):
            raise ReducerInputError(f"update[{i}] must be a list, got {type(element).__name__}")
        out.extend(element)
    return out


def merge_all(prior: Any, update: Any) -> dict[str, Any]:
    """`merge` applied for each mapping of the update, in order."""
    out = _need_mapping(prior, "prior")
    for i, element in enumerate(_need_list(update, "update")):
        if not isinstance(element, Mapping):
            raise ReducerInputError(f"update[{i}] must be a mapping, got {type(element).__name__}")
        out.update(element)
    return out


def _key_of(record: Any, key: str | None) -> Any:
    if key is None:
        value = record
    elif not isinstance(record, Mapping):
        raise ReducerInputError(f"records must be mappings to take key '{key}', got {record!r}")
    else:
        value = resolve(record, key.split("."))
        if value is None:
            raise ReducerInputError(f"record {record!r} has no key '{key}'")
    try:
        hash(value)
    except TypeError:
        raise ReducerInputError(f"key {value!r} is not hashable") from None
    return (isinstance(value, bool), value)  # True and 1 are different keys


def bounded_append(max_len: int) -> ReducerFn:
    """prior + update, then the oldest dropped until `max_len` remain."""

    def reduce(prior: Any, update: Any) -> list[Any]:
        if not _need_list(update, "update"):
            return _need_list(prior, "prior")
        joined = append(prior, update)
        return joined[-max_len:] if len(joined) > max_len else joined

    return reduce


def dedupe_append(key: str | None = None) -> ReducerFn:
    """prior + the update's items whose key is not yet seen (first wins, also within update)."""

    def reduce(prior: Any, update: Any) -> list[Any]:
        out = _need_list(prior, "prior")
        if not _need_list(update, "update"):
            return out
        seen = {_key_of(item, key) for item in out}
        for item in _need_list(update, "update"):
            k = _key_of(item, key)
            if k not in seen:
                seen.add(k)
                out.append(item)
        return out

    return reduce


def merge_by_key(key: str) -> ReducerFn:
    """Records with a known key replace the last prior one in place; new keys are appended."""

    def reduce(prior: Any, update: Any) -> list[Any]:
        out = _need_list(prior, "prior")
        if not _need_list(update, "update"):
            return out
        where = {_key_of(r, key): i for i, r in enumerate(out)}
        for record in _need_list(update, "update"):
            k = _key_of(record, key)
            if k in where:
                out[where[k]] = record
            else:
                where[k] = len(out)
                out.append(record)
        return out

    return reduce


def _positive_int(params: Mapping[str, Any], name: str) -> int:
    value = params.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ReducerConfigError(f"'{name}' must be a whole number of at least 1, got {value!r}")
    return value


def _key_param(params: Mapping[str, Any], required: bool) -> str | None:
    value = params.get("key")
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise ReducerConfigError(f"'key' must be a non-empty path string, got {value!r}")
    return value


def _no_params(params: Mapping[str, Any], fn: ReducerFn) -> ReducerFn:
    if params:
        raise ReducerConfigError(f"takes no parameters, got {sorted(params)}")
    return fn


FACTORIES: dict[str, tuple[frozenset[str], Callable[[Mapping[str, Any]], ReducerFn]]] = {
    "last_write_wins": (frozenset(), lambda p: _no_params(p, last_write_wins)),
    "append": (frozenset(), lambda p: _no_params(p, append)),
    "merge": (frozenset(), lambda p: _no_params(p, merge)),
    "concat_flatten": (frozenset(), lambda p: _no_params(p, concat_flatten)),
    "merge_all": (frozenset(), lambda p: _no_params(p, merge_all)),
    "bounded_append": (
        frozenset({"max_len"}),
        lambda p: bounded_append(_positive_int(p, "max_len")),
    ),
    "dedupe_append": (frozenset({"key"}), lambda p: dedupe_append(_key_param(p, required=False))),
    "merge_by_key": (
        frozenset({"key"}),
        lambda p: merge_by_key(_key_param(p, required=True) or ""),
    ),
}
CANONICAL = tuple(FACTORIES)


def build_reducer(ref: ReducerRef) -> ReducerFn:
    """The reducer function for `ref`; raises `ReducerConfigError` for bad parameters."""
    if ref.name in FACTORIES:
        allowed, factory = FACTORIES[ref.name]
        unknown = set(ref.params) - allowed
        if unknown:
            raise ReducerConfigError(f"unknown parameter(s) {sorted(unknown)}")
        return factory(ref.params)
    if ":" not in ref.name:
        raise ReducerConfigError(
            f"unknown reducer {ref.name!r}; use one of {', '.join(CANONICAL)} or 'pkg.module:fn'"
        )
    if ref.params:
        raise ReducerConfigError("custom reducers take no parameters")
    try:
        return import_callable(ref.name)
    except ImportFailed as exc:
        raise ReducerConfigError(str(exc)) from None


@dataclass(frozen=True)
class Reducers:
    """The reducer of every declared field; undeclared fields use last_write_wins."""

    functions: Mapping[str, ReducerFn] = field(default_factory=dict)
    names: Mapping[str, str] = field(default_factory=dict)

    def name_of(self, field_name: str) -> str:
        """The reducer name of a field."""
        return self.names.get(field_name, "last_write_wins")

    def merge(self, state: Mapping[str, Any], update: Mapping[str, Any], node: str | None) -> dict[str, Any]:
        """The state with `update` merged field by field; raises `ReducerError`."""
        merged = dict(state)
        for name, value in update.items():
            fn = self.functions.get(name, last_write_wins)
            try:
                merged[name] = fn(state.get(name), value)
            except Exception as exc:
                raise ReducerError(
                    f"reducer '{self.name_of(name)}' of field '{name}' rejected the update "
                    f"from node '{node}': {exc}",
                    field=name,
                    reducer=self.name_of(name),
                    node=node,
                    state=dict(state),
                ) from exc
        return merged
