"""`graphrunner validate GRAPH... [--json] [--env]`: the checks of DESIGN §2.6, no action run."""

from __future__ import annotations

from dataclasses import dataclass

import click

from graphrunner.cli.common import USAGE_ERROR, load_settings, plural, print_error, print_json
from graphrunner.errors import GraphNotFound, GraphValidationError
from graphrunner.report import Issue, ValidationReport
from graphrunner.settings import Settings


@dataclass(frozen=True)
class Checked:
    """The report of one GRAPH argument; `missing` when the graph could not be found or read."""

    ref: str
    report: ValidationReport
    missing: bool = False


@click.command("validate")
@click.argument("graphs", nargs=-1, required=True, metavar="GRAPH...")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the report {valid, graph_id, file, errors, warnings, node_count}, each issue "
    "{code, message, node, location, file, line}; a list of reports for several graphs.",
)
@click.option(
    "--env", "check_env", is_flag=True, help="Also report env_requires missing from the environment."
)
def validate(graphs: tuple[str, ...], as_json: bool, check_env: bool) -> None:
    """Validate graph files or graph ids without running anything."""
    settings = load_settings()
    checked = [check(ref, settings, check_env) for ref in graphs]
    if as_json:
        reports = [c.report.to_dict() for c in checked]
        print_json(reports[0] if len(reports) == 1 else reports)
    else:
        for c in checked:
            print_human(c)
    raise click.exceptions.Exit(exit_code(checked))


def check(ref: str, settings: Settings, check_env: bool) -> Checked:
    """Validate one graph; a graph that is not found is reported, never raised."""
    from graphrunner.loading import inspect_graph  # the graph model: not needed for --help

    try:
        _, report = inspect_graph(ref, settings=settings, check_env=check_env)
    except GraphNotFound as exc:
        return _missing(ref, str(exc))
    except OSError as exc:
        return _missing(ref, f"cannot read graph {ref!r}: {exc.strerror or exc}")
    except GraphValidationError as exc:  # unreadable text: too large, not UTF-8
        report = ValidationReport(errors=exc.issues, file=exc.source)
    return Checked(ref, report)


def _missing(ref: str, message: str) -> Checked:
    print_error(message)
    return Checked(ref, ValidationReport(errors=[Issue("graph_not_found", message)]), missing=True)


def print_human(checked: Checked) -> None:
    """Print one `error:`/`warning:` line per issue, then the summary line."""
    report = checked.report
    if not checked.missing:
        for issue in report.errors:
            click.echo(f"error: {issue.render()}")
    for issue in report.warnings:
        click.echo(f"warning: {issue.render()}")
    click.echo(f"{checked.ref}: {summary(checked)}")


def summary(checked: Checked) -> str:
    """`valid (3 nodes, 0 warnings)`, `invalid (2 errors)` or `not found`."""
    report = checked.report
    warnings = plural(len(report.warnings), "warning")
    if checked.missing:
        return "not found"
    if report.valid:
        return f"valid ({plural(report.node_count, 'node')}, {warnings})"
    tail = f", {warnings}" if report.warnings else ""
    return f"invalid ({plural(len(report.errors), 'error')}{tail})"


def exit_code(checked: list[Checked]) -> int:
    """2 when a graph was not found, else 1 when one is invalid, else 0."""
    if any(c.missing for c in checked):
        return USAGE_ERROR
    return 1 if any(not c.report.valid for c in checked) else 0
