"""`graphrunner schema [--output FILE] [--json]`: the JSON Schema of graph files."""

from __future__ import annotations

import json
from pathlib import Path

import click

from graphrunner.cli.common import fail


@click.command("schema")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the schema to FILE instead of stdout.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Accepted for every command: the schema is JSON anyway."
)
def schema(output: Path | None, as_json: bool) -> None:
    """Print the JSON Schema (draft 2020-12) of graph files (with or without --json)."""
    from graphrunner.schema_export import graph_json_schema  # the graph model: not needed for --help

    text = json.dumps(graph_json_schema(), indent=2, ensure_ascii=False)
    if output is None:
        click.echo(text)
        return
    try:
        output.write_text(text + "\n", encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write {str(output)!r}: {exc.strerror or exc}", 1)
