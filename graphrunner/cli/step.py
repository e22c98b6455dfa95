"""`graphrunner step GRAPH --node N [--state JSON|@file] [-i k=v ...] [--inputs JSON|@file] [--json]`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

from graphrunner.cli.common import (
    USAGE_ERROR,
    fail,
    input_options,
    json_object,
    load_settings,
    merge_inputs,
    open_graph,
    print_json,
)
from graphrunner.cli.progress import format_step
from graphrunner.cli.result import describe_error
from graphrunner.errors import (
    GraphNotFound,
    GraphrunnerError,
    GraphValidationError,
    LimitExceeded,
    StateValidationError,
    UnknownNode,
)
from graphrunner.settings import Settings

if TYPE_CHECKING:
    from graphrunner.graph import Graph
    from graphrunner.runner.single import StepReport


@click.command("step")
@click.argument("graph_ref", metavar="GRAPH")
@click.option("--node", required=True, metavar="N", help="The node to run.")
@click.option(
    "--state",
    "state_json",
    metavar="JSON|@FILE",
    callback=json_object,
    help="The state before the node, as a JSON object or @path to a JSON file; "
    "merged over the declared defaults and checked against the state schema.",
)
@input_options
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print {state, executed_node, next_node, step_count, status, error} as JSON.",
)
def step(
    graph_ref: str,
    node: str,
    state_json: dict[str, Any],
    input_pairs: dict[str, str],
    inputs_json: dict[str, Any],
    as_json: bool,
) -> None:
    """Run one node of GRAPH against a given state and print what it did.

    The node runs once in this process (no Redis, no Celery): its action, assign and routing,
    with retries and error handling as in a run. No run is created or touched. The result is
    the state after the node, the node that would run next (null when the run would end) and
    `status`: running, paused, completed, completed_with_errors or failed. For a pause node,
    next_node is where a resume without a state patch would continue.

    A progress line goes to stderr (GRAPHRUNNER_QUIET=1 silences it); stdout carries only the
    result. Exit 0 when the node succeeded or its error was handled (on_error, error_mode
    continue), 1 when it failed, 2 for an invalid graph, an unknown node, or state or inputs
    that fail the schema or the size limit (nothing runs then).
    """
    settings = load_settings()
    graph = open_graph(graph_ref, settings)
    report = take_step(graph, node, state_json, merge_inputs(inputs_json, input_pairs, graph), settings)
    if not settings.quiet:
        for record in report.steps:
            click.echo(format_step(graph.id, record), err=True)
    if as_json:
        print_json(report.to_dict())
    else:
        click.echo(human_report(report))
    raise click.exceptions.Exit(0 if report.ok else 1)


def take_step(
    graph: Graph, node: str, state: Mapping[str, Any], inputs: Mapping[str, Any], settings: Settings
) -> StepReport:
    """Run the node; user errors print `error: ...` and exit (2 for bad input, else 1)."""
    from graphrunner.runner.single import single_step_sync  # not needed for --help

    bad_input = (UnknownNode, StateValidationError, LimitExceeded, GraphNotFound, GraphValidationError)
    try:
        return single_step_sync(graph, node, state, inputs=inputs, settings=settings)
    except bad_input as exc:
        fail(str(exc), USAGE_ERROR)
    except GraphrunnerError as exc:
        fail(str(exc), 1)


def human_report(report: StepReport) -> str:
    """A few lines for people: the node, status, next node, the state as JSON, the error if any."""
    lines = [
        f"executed node: {report.executed_node}",
        f"status: {report.status}",
        f"next node: {report.next_node or '(none)'}",
        f"state: {json.dumps(report.state, indent=2, default=str, ensure_ascii=False)}",
    ]
    if report.error is not None:
        lines.append(f"error: {describe_error(report.error)}")
    return "\n".join(lines)
