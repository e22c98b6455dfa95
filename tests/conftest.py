"""Shared test helpers: build graphs from YAML text and run them in-process."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

import pytest

from graphrunner import Graph, RunResult, parse_graph


@pytest.fixture
def graph_of() -> Callable[[str], Graph]:
    """Parse dedented YAML text into a validated graph."""

    def build(text: str) -> Graph:
        return parse_graph(textwrap.dedent(text), file="test.yaml")

    return build


@pytest.fixture
def run_yaml(graph_of: Callable[[str], Graph]) -> Callable[..., RunResult]:
    """Parse YAML text and run it to the end in-process."""

    def run(text: str, inputs: dict[str, Any] | None = None, **kwargs: Any) -> RunResult:
        return graph_of(text).invoke_sync(inputs, **kwargs)

    return run
