"""Validation and static analysis (DESIGN §2.6): the same checks for `validate` and every submit."""

from __future__ import annotations

from collections.abc import Collection

from graphrunner.model import GraphSpec
from graphrunner.report import Issue
from graphrunner.validation.analysis import analyse
from graphrunner.validation.checks import check_foreach, check_reducers, check_tools, check_updates
from graphrunner.validation.children import ChildLookup, check_children
from graphrunner.validation.structure import check_structure


def check_spec(spec: GraphSpec, tools: Collection[str], lookup: ChildLookup) -> list[Issue]:
    """Every error of a parsed graph."""
    return (
        check_structure(spec)
        + check_reducers(spec)
        + check_tools(spec, tools)
        + check_foreach(spec)
        + check_updates(spec)
        + check_children(spec, lookup)
    )


__all__ = ["ChildLookup", "analyse", "check_spec"]
