"""Reducer markers for builder state fields: `Annotated[list[str], append]`.

Each marker names one of graphrunner's eight canonical reducers (with its parameters) or
a custom `pkg.module:fn` reducer; it becomes the field's `reducer:` in the graph. The
reducer functions of `graphrunner.reducers` (`append`, `merge`, ...) are accepted as
markers too. Parameters are checked when the graph is compiled, with the same codes as a
graph file (`bounded_append(0)` is `reducer_configuration_invalid`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from graphrunner import reducers as functions


@dataclass(frozen=True)
class Reducer:
    """A state field's reducer: a canonical name and its parameters, or a custom function."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    function: Callable[[Any, Any], Any] | None = None

    def to_yaml(self, name: str | None = None) -> str | dict[str, Any]:
        """How the reducer is written under `state:` in a graph file (`name`: a custom one's reference)."""
        written = name or self.name
        return {"name": written, **self.params} if self.params else written


last_write_wins = Reducer("last_write_wins")
append = Reducer("append")
merge = Reducer("merge")
concat_flatten = Reducer("concat_flatten")
merge_all = Reducer("merge_all")


def bounded_append(max_len: int) -> Reducer:
    """prior + update, the oldest dropped until `max_len` remain."""
    return Reducer("bounded_append", {"max_len": max_len})


def dedupe_append(key: str | None = None) -> Reducer:
    """prior + the update's items whose key (a path, or the item itself) is new."""
    return Reducer("dedupe_append", {} if key is None else {"key": key})


def merge_by_key(key: str) -> Reducer:
    """Records with a known `key` replaced in place, new ones appended."""
    return Reducer("merge_by_key", {"key": key})


def custom(fn: Callable[[Any, Any], Any]) -> Reducer:
    """A custom reducer `fn(prior, update)`: a module-level function workers can import."""
    return Reducer(getattr(fn, "__qualname__", repr(fn)), function=fn)


FUNCTION_MARKERS: dict[Callable[..., Any], Reducer] = {
    functions.last_write_wins: last_write_wins,
    functions.append: append,
    functions.merge: merge,
    functions.concat_flatten: concat_flatten,
    functions.merge_all: merge_all,
}


def marker_of(value: Any) -> Reducer | None:
    """The reducer a piece of `Annotated` metadata stands for, or None when it is no reducer."""
    if isinstance(value, Reducer):
        return value
    try:
        return FUNCTION_MARKERS.get(value)
    except TypeError:  # unhashable metadata
        return None
