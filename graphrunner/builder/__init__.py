"""The Python front end of the graph model: `GraphBuilder` and reducer markers for state fields."""

from graphrunner.builder.builder import BranchSpec, GraphBuilder, branch
from graphrunner.builder.reducers import (
    Reducer,
    append,
    bounded_append,
    concat_flatten,
    custom,
    dedupe_append,
    last_write_wins,
    merge,
    merge_all,
    merge_by_key,
)
from graphrunner.model import END

__all__ = [
    "END",
    "BranchSpec",
    "GraphBuilder",
    "Reducer",
    "append",
    "bounded_append",
    "branch",
    "concat_flatten",
    "custom",
    "dedupe_append",
    "last_write_wins",
    "merge",
    "merge_all",
    "merge_by_key",
]
