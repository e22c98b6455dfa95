"""`graphrunner render [GRAPH] [--run RUN] [--format mermaid|dot|svg]`: a graph as a picture,
a run's path, current node and failed steps painted on it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from graphrunner.cli.common import (
    USAGE_ERROR,
    fail,
    inspected,
    load_settings,
    plural,
    print_json,
    refuse_invalid,
)
from graphrunner.cli.connect import cluster_client, cluster_settings, reported_errors
from graphrunner.errors import GraphValidationError
from graphrunner.settings import Settings

if TYPE_CHECKING:  # imported when used: the graph model is not needed for --help
    from graphrunner.model import GraphSpec
    from graphrunner.render import RunTrace
    from graphrunner.report import ValidationReport

FORMATS = ("mermaid", "dot", "svg")  # graphrunner.render.FORMATS (a unit test keeps them equal)
MAX_NODES = 200  # graphrunner.render.MAX_NODES


@click.command("render")
@click.argument("graph_ref", metavar="[GRAPH]", required=False)
@click.option("--run", "run_id", metavar="RUN", help="Paint this run: its path, current node, failed steps.")
@click.option(
    "--format", "fmt", type=click.Choice(FORMATS), default="mermaid", show_default=True, help="What to write."
)
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file, not stdout."
)
@click.option(
    "--max-nodes",
    type=click.IntRange(min=1),
    default=MAX_NODES,
    show_default=True,
    help="Draw at most this many nodes; the others stand behind one '… more' node.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the diagram (nodes, edges, paint) as JSON.")
def render(
    graph_ref: str | None,
    run_id: str | None,
    fmt: str,
    output: Path | None,
    max_nodes: int,
    as_json: bool,
) -> None:
    """Draw GRAPH as a Mermaid flowchart, Graphviz DOT or a standalone SVG.

    With --run, the run is read from GRAPHRUNNER_REDIS_URL and drawn on the graph version it
    is pinned to (GRAPH may then be left out; it is drawn only if that version is gone).
    """
    from graphrunner.render import build_diagram, to_dot, to_mermaid, to_svg

    if graph_ref is None and run_id is None:
        fail("give GRAPH, --run RUN, or both (graphrunner render --help)", USAGE_ERROR)
    settings = cluster_settings() if run_id is not None else load_settings()
    spec = graph_spec(graph_ref, settings) if graph_ref is not None else None
    trace = None
    if run_id is not None:
        spec, trace = _stored(run_id, spec, settings)
    assert spec is not None
    diagram = build_diagram(spec, trace, max_nodes=max_nodes)
    for note in diagram.notes:
        click.echo(f"note: {note}", err=True)
    if as_json:
        print_json(diagram.to_dict())
        return
    writer = {"mermaid": to_mermaid, "dot": to_dot, "svg": to_svg}[fmt]
    _write(writer(diagram), output)


def _stored(run_id: str, spec: GraphSpec | None, settings: Settings) -> tuple[GraphSpec, RunTrace]:
    """The run's graph version (or `spec` when it is gone) and its trace; errors exit 1 or 2."""
    from graphrunner.stored_runs import read_run

    with reported_errors(), cluster_client(settings) as client:
        stored = read_run(client, run_id, spec)
    for warning in stored.warnings:
        click.echo(f"warning: {warning}", err=True)
    return stored.spec, stored.trace


def graph_spec(ref: str, settings: Settings) -> GraphSpec:
    """The graph model of GRAPH; a graph that does not validate is drawn as written, with a warning."""
    graph, report = inspected(ref, settings)
    if graph is not None:
        return graph.spec
    spec = _as_written(ref, report)
    if spec is None:
        refuse_invalid(ref, report)
    count = plural(len(report.errors), "error")
    click.echo(f"warning: graph {ref!r} has {count} (graphrunner validate): drawn as written", err=True)
    return spec


def _as_written(ref: str, report: ValidationReport) -> GraphSpec | None:
    """The graph model of a file whose YAML and schema are fine but which fails other checks."""
    from graphrunner.loading import parse_spec

    if report.file is None or any(i.code == "invalid_yaml" for i in report.errors):
        return None
    default_id = Path(report.file).stem if Path(ref).is_file() else ref
    try:
        return parse_spec(Path(report.file).read_text(encoding="utf-8"), report.file, default_id)
    except (GraphValidationError, OSError, UnicodeDecodeError):
        return None


def _write(text: str, output: Path | None) -> None:
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write {str(output)!r}: {exc.strerror or exc}", USAGE_ERROR)
