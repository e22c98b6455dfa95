"""The example tools: results, bad params, the published entry points and the example graph run in-process.

Needs the package installed (`pip install --no-deps -e workers/example_tools`): the entry points
are read from its installed metadata, as a worker reads them.
"""

from __future__ import annotations

import asyncio
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from graphrunner import load_graph
from graphrunner.errors import ToolError
from graphrunner.tools import Tool, ToolContext, ToolRegistry, default_registry

try:
    from graphrunner_example_tools import SlugifyTool, WordCountTool, count_words, slugify
except ModuleNotFoundError as exc:  # pragma: no cover - only when the package is missing
    raise ImportError(
        "graphrunner-example-tools is not installed: pip install --no-deps -e workers/example_tools"
    ) from exc

GRAPH = Path(__file__).resolve().parents[1] / "graphs" / "slugify.yaml"
CONTEXT = ToolContext(run_id="r1", graph_id="example/slugify", node="n", step=1)
NAMES = {"example.slugify": SlugifyTool, "example.word_count": WordCountTool}


def run(tool: Tool, params: dict[str, Any]) -> Any:
    """Run `tool` to completion."""
    return asyncio.run(tool.run(params, CONTEXT))


def error_of(tool: Tool, params: dict[str, Any]) -> ToolError:
    """The ToolError `tool` raises for `params`."""
    with pytest.raises(ToolError) as info:
        run(tool, params)
    return info.value


def test_the_tools_follow_the_protocol() -> None:
    for name, cls in NAMES.items():
        tool = cls()
        assert isinstance(tool, Tool)
        assert (tool.name, tool.version) == (name, "1")


@pytest.mark.parametrize(
    ("params", "slug"),
    [
        ({"text": "Hello, World!"}, "hello-world"),
        ({"text": "  Crème brûlée -- à la carte  "}, "creme-brulee-a-la-carte"),
        ({"text": "Release 2.0: what's new?"}, "release-2-0-what-s-new"),
        ({"text": "A long title", "max_length": 6}, "a-long"),
        ({"text": "A long title", "max_length": 2}, "a"),  # no dash left dangling
        ({"text": "x" * 100}, "x" * 64),  # the default max_length
        ({"text": "!!! ???"}, ""),
    ],
)
def test_slugify(params: dict[str, Any], slug: str) -> None:
    assert run(SlugifyTool(), params) == {"slug": slug}


def test_slugify_function_matches_the_tool() -> None:
    assert slugify("Hello, World!", max_length=5) == "hello"


@pytest.mark.parametrize(
    ("text", "counts"),
    [
        ("one two three", {"words": 3, "lines": 1}),
        ("one two\n  three\tfour\n", {"words": 4, "lines": 2}),
        ("first\n\nthird", {"words": 2, "lines": 3}),
        ("", {"words": 0, "lines": 0}),
    ],
)
def test_word_count(text: str, counts: dict[str, int]) -> None:
    assert run(WordCountTool(), {"text": text}) == counts
    assert count_words(text) == counts


@pytest.mark.parametrize(
    ("tool", "params", "problem"),
    [
        (SlugifyTool(), {}, "text: Field required"),
        (SlugifyTool(), {"text": 42}, "text: Input should be a valid string"),
        (SlugifyTool(), {"text": "x", "max_length": 0}, "max_length: Input should be greater than or equal"),
        (SlugifyTool(), {"text": "x", "max_length": "long"}, "max_length: Input should be a valid integer"),
        (SlugifyTool(), {"text": "x", "maxlength": 5}, "maxlength: Extra inputs are not permitted"),
        (WordCountTool(), {}, "text: Field required"),
        (WordCountTool(), {"text": None}, "text: Input should be a valid string"),
    ],
)
def test_bad_params_are_a_validation_error_naming_tool_and_param(
    tool: Tool, params: dict[str, Any], problem: str
) -> None:
    err = error_of(tool, params)
    assert str(err).startswith(f"tool '{tool.name}' got bad params: ")
    assert problem in str(err)
    assert (err.error_type, err.classification) == ("InvalidParams", "validation")


def test_the_entry_points_are_published() -> None:
    published = {ep.name: ep for ep in entry_points(group="graphrunner.tools")}
    for name, cls in NAMES.items():
        assert name in published, f"entry point {name} missing: is the package installed?"
        assert published[name].load() is cls


def test_a_registry_loads_both_tools_from_the_entry_points() -> None:
    fresh = ToolRegistry()
    fresh.load_entry_points()
    assert set(NAMES) <= set(fresh.names())
    assert isinstance(fresh.get("example.slugify"), SlugifyTool)
    # the process-wide registry (created once per process) knows them too, beside the built-ins
    assert {"echo", *NAMES} <= set(default_registry().names())


def test_the_example_graph_runs_in_process() -> None:
    graph = load_graph(GRAPH)
    assert graph.id == "example/slugify"
    result = graph.invoke_sync({"title": "Hello, Wörld!\nSecond line"})
    assert result.status == "completed", result.error
    assert result.path == ["slug", "count", "done"]
    assert result.output == {
        "slug": "hello-world-second-line",
        "words": 4,
        "lines": 2,
        "log": ["slugified", "counted 4 words"],
    }
    assert result.state["counts"] == {"words": 4, "lines": 2}


def test_the_example_graph_passes_max_length_through() -> None:
    result = load_graph(GRAPH).invoke_sync({"title": "A long title", "max_length": 6})
    assert (result.status, result.output["slug"]) == ("completed", "a-long")


def test_the_example_graph_fails_on_bad_params_with_the_tools_message() -> None:
    result = load_graph(GRAPH).invoke_sync({"title": "x", "max_length": 0})
    assert (result.status, result.path) == ("failed", ["slug"])
    assert result.error is not None
    assert "tool 'example.slugify' got bad params: max_length" in result.error.message
