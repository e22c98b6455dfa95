"""Start-up stays lean: which modules a fresh process has loaded after an import or a command.

The import graph is checked, never a time: Celery, kombu, redis-py, httpx, CEL and the
builder are imported only by what uses them (DESIGN §9, issue 13), and CEL without the `cel`
package's own CLI (`cel.cel` is its compiler, `cel` the package that imports typer and rich).
`python -m benchmarks.startup` measures the times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from graphrunner.cli import main, runs_list

REPO = Path(__file__).resolve().parents[2]
HELLO = "graphs/hello.yaml"
MARK = "LOADED:"
CLUSTER = ("celery", "kombu", "redis", "httpx", "graphrunner.client")
CEL_CLI = ("cel", "typer", "rich", "prompt_toolkit")
WATCHED = (*CLUSTER, *CEL_CLI, "cel.cel", "graphrunner.builder", "graphrunner.model")

# Runs `body` in a fresh interpreter, then prints which of the watched modules it loaded.
PROBE = """
import json, sys
try:
{body}
finally:
    print({mark!r} + json.dumps(sorted(m for m in {watched!r} if m in sys.modules)))
"""

# The console script's own code, for the arguments given.
CLI_BODY = """
    sys.argv = ["graphrunner", *{args!r}]
    from graphrunner.cli import main
    try:
        main(prog_name="graphrunner")
    except SystemExit as exc:
        assert exc.code in (0, None), exc.code
"""


def loaded_after(body: str) -> set[str]:
    """The watched modules a fresh interpreter has loaded after running `body` (indented code)."""
    code = PROBE.format(body=body, mark=MARK, watched=WATCHED)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHRUNNER_")}
    env["GRAPHRUNNER_QUIET"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    line = [text for text in done.stdout.splitlines() if text.startswith(MARK)][-1]
    return set(json.loads(line.removeprefix(MARK)))


def command(*args: str) -> set[str]:
    """The watched modules loaded by `graphrunner ARGS` (which must exit 0)."""
    return loaded_after(CLI_BODY.format(args=list(args)))


def test_import_graphrunner_loads_none_of_the_heavy_parts() -> None:
    assert loaded_after("    import graphrunner") == set()


def test_public_names_import_what_they_need_on_first_use() -> None:
    assert loaded_after("    from graphrunner import GraphrunnerError, __version__") == set()
    assert "graphrunner.builder" in loaded_after("    from graphrunner import GraphBuilder")
    producer = loaded_after("    from graphrunner import Client")
    assert "redis" in producer
    assert {"celery", "kombu"} & producer == set()  # a producer builds no Celery app for a Redis broker
    assert loaded_after("    from graphrunner import load_graph") & set(CLUSTER) == set()


def test_cel_is_loaded_when_an_expression_is_compiled_and_its_cli_never() -> None:
    body = """
    from graphrunner.expressions import compile_expression
    assert compile_expression("size(x) + 1", frozenset({"x"})).evaluate({"x": [1]}) == 2
"""
    assert "cel.cel" not in loaded_after("    import graphrunner.expressions")
    loaded = loaded_after(body)
    assert "cel.cel" in loaded
    assert loaded & set(CEL_CLI) == set()


def test_httpx_is_imported_when_the_http_tool_sends_a_request() -> None:
    body = """
    import asyncio
    from graphrunner.errors import ToolError
    from graphrunner.tools import ToolContext, default_registry
    tool = default_registry().get("http")
    assert "httpx" not in sys.modules
    context = ToolContext(run_id="r", graph_id="g", node="n", step=1)
    try:
        asyncio.run(tool.run({"url": "gopher://example.invalid/"}, context))
    except ToolError as exc:
        assert "bad url" in str(exc), exc
"""
    assert "httpx" in loaded_after(body)


def test_help_loads_neither_the_cluster_nor_the_graph_model() -> None:
    assert command("--help") == set()


# their help lists Celery's worker options and Flower's options: it loads those programs
SHOWS_ANOTHER_PROGRAMS_OPTIONS = {
    "worker": {"celery", "kombu", "redis"},
    "flower": {"celery", "kombu", "redis"},
}


@pytest.mark.parametrize("name", sorted(main.commands))
def test_help_of_every_command_loads_nothing_heavy(name: str) -> None:
    assert command(name, "--help") <= SHOWS_ANOTHER_PROGRAMS_OPTIONS.get(name, set())


@pytest.mark.parametrize(
    "args",
    [
        ("validate", HELLO),
        ("validate", "--json", HELLO),
        ("schema",),
        ("step", HELLO, "--node", "greet", "-i", "name=Ada"),
        ("run", "--in-process", HELLO, "-i", "name=Ada"),
    ],
    ids=lambda args: " ".join(args),
)
def test_commands_without_a_cluster_load_no_cluster_module(args: tuple[str, ...]) -> None:
    assert command(*args) & set(CLUSTER) == set()


def test_validate_loads_cel_without_its_cli() -> None:
    loaded = command("validate", HELLO)  # hello.yaml has a CEL expression: size(state.log)
    assert "cel.cel" in loaded
    assert loaded & set(CEL_CLI) == set()


def test_schema_loads_no_cel() -> None:
    assert "cel.cel" not in command("schema")


@pytest.mark.parametrize("name", sorted(main.commands))
def test_help_of_every_command_lists_its_options(name: str) -> None:
    cmd = main.commands[name]
    text = CliRunner().invoke(main, [name, "--help"]).output
    for param in cmd.params:
        if isinstance(param, click.Option) and not param.hidden:
            assert param.opts[-1] in text, f"{name} --help does not show {param.opts[-1]}"


def test_list_options_match_the_store_and_the_engine() -> None:
    from graphrunner.engine import RunStatus
    from graphrunner.store.query import MAX_LIMIT

    assert runs_list.MAX_LIMIT == MAX_LIMIT
    assert tuple(s.value for s in RunStatus) == runs_list.STATUSES
