"""Warnings for expressions that are sure to fail when they run: a constant zero divisor, a
constant index out of a literal list (`constant_division_by_zero`, `constant_index_out_of_range`)."""

from __future__ import annotations

from graphrunner.expressions.lint import constant_problems
from graphrunner.model import GraphSpec
from graphrunner.report import Issue
from graphrunner.validation.sites import expression_sites


def constant_failures(spec: GraphSpec) -> list[Issue]:
    """One warning per certain run-time failure written into an expression of `spec`."""
    issues = []
    for site in expression_sites(spec):
        node, where = site.node, site.location
        subject = f"node '{node}': {where.removeprefix(f'nodes.{node}.')}" if node else where
        issues += [
            Issue(code, f"{subject}: expression '{site.text}' {problem}", node=node, location=where)
            for code, problem in constant_problems(site.text)
        ]
    return issues
