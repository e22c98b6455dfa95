"""`graphrunner run GRAPH [-i k=v ...] [--inputs JSON|@file] [--json] [--timeout S]`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import click

from graphrunner.cli.common import (
    USAGE_ERROR,
    fail,
    input_options,
    load_settings,
    merge_inputs,
    open_graph,
    print_json,
)
from graphrunner.cli.progress import format_step
from graphrunner.engine import RunSnapshot
from graphrunner.errors import GraphNotFound, GraphrunnerError, GraphValidationError, StateValidationError
from graphrunner.graph import Graph
from graphrunner.results import RunResult
from graphrunner.runner.local import StepObserver


@click.command("run")
@click.argument("graph_ref", metavar="GRAPH")
@input_options
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="S",
    help="Give up when the whole run takes longer than S seconds.",
)
def run(
    graph_ref: str,
    input_pairs: dict[str, Any],
    inputs_json: dict[str, Any],
    as_json: bool,
    timeout: float | None,
) -> None:
    """Run a graph to the end and print its result.

    Progress lines go to stderr (GRAPHRUNNER_QUIET=1 silences them); stdout carries only the result.
    """
    settings = load_settings()
    inputs = merge_inputs(inputs_json, input_pairs)
    graph = open_graph(graph_ref, settings)
    observer = None if settings.quiet else progress_printer()
    result = execute(graph, inputs, observer, timeout)
    if as_json:
        print_json(result.to_dict())
    else:
        click.echo(human_summary(result))
    raise click.exceptions.Exit(0 if result.ok else 1)


def execute(
    graph: Graph, inputs: Mapping[str, Any], observer: StepObserver | None, timeout: float | None
) -> RunResult:
    """Run the graph; user errors print `error: ...` and exit (2 for bad inputs, else 1)."""
    try:
        return run_graph(graph, inputs, observer, timeout)
    except TimeoutError:
        limit = f" after {timeout:g}s" if timeout else ""
        fail(f"run of graph {graph.id!r} timed out{limit} (--timeout)", 1)
    except (StateValidationError, GraphNotFound, GraphValidationError) as exc:
        fail(str(exc), USAGE_ERROR)
    except GraphrunnerError as exc:
        fail(str(exc), 1)


def run_graph(
    graph: Graph, inputs: Mapping[str, Any], observer: StepObserver | None, timeout: float | None
) -> RunResult:
    """The one runner call: the in-process runner for now, bounded by `timeout` seconds."""
    return asyncio.run(asyncio.wait_for(graph.invoke(inputs, on_step=observer), timeout))


def progress_printer() -> StepObserver:
    """An `on_step` observer printing one progress line per step on stderr."""

    def observe(snapshot: RunSnapshot, record: dict[str, Any]) -> None:
        click.echo(format_step(snapshot.graph_id, record), err=True)

    return observe


def human_summary(result: RunResult) -> str:
    """A few lines for people: status, output as JSON, path, and the error if any."""
    lines = [
        f"status: {result.status}",
        f"run: {result.run_id}",
        f"output: {json.dumps(result.output, indent=2, default=str, ensure_ascii=False)}",
        f"path: {' -> '.join(result.path) or '(none)'}",
    ]
    if result.errors_suppressed:
        lines.append(f"suppressed errors: {result.errors_suppressed}")
    if result.error:
        lines.append(f"error: {describe_error(result.error)}")
    return "\n".join(lines)


def describe_error(error: Mapping[str, Any]) -> str:
    """`node_exception at node 'a' (step 1): kaboom`."""
    where = f" at node {error['node']!r}" if error.get("node") else ""
    step = f" (step {error['step']})" if error.get("step") else ""
    return f"{error.get('type', 'error')}{where}{step}: {error.get('message', '')}"
