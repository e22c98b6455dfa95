"""Helpers shared by the CLI commands: JSON and error output, settings, `-i`/`--inputs` parsing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from graphrunner.errors import GraphNotFound, GraphValidationError
from graphrunner.limits import MAX_DEPTH
from graphrunner.report import ValidationReport
from graphrunner.settings import Settings
from graphrunner.text import SURROGATE

if TYPE_CHECKING:
    from graphrunner.graph import Graph

USAGE_ERROR = 2
F = TypeVar("F", bound=Callable[..., Any])


def print_json(data: Any) -> None:
    """Print `data` as indented JSON on stdout (escaped where UTF-8 cannot write a string as it is)."""
    text = json.dumps(data, indent=2, default=str, ensure_ascii=False)
    if SURROGATE.search(text):  # an unpaired surrogate, e.g. from a tool's result: JSON escapes it
        text = json.dumps(data, indent=2, default=str)
    click.echo(text)


def print_error(message: str) -> None:
    """Print `error: <message>` on stderr."""
    click.echo(f"error: {message}", err=True)


def fail(message: str, code: int) -> NoReturn:
    """Print `error: <message>` on stderr and exit with `code`."""
    print_error(message)
    raise click.exceptions.Exit(code)


def load_settings() -> Settings:
    """The settings from the environment; a malformed variable is a usage error."""
    try:
        return Settings.from_env()
    except ValueError as exc:
        fail(str(exc), USAGE_ERROR)


def parse_value(text: str) -> Any:
    """`text` parsed as strict JSON when it parses (`NaN` stays text), else the text itself.

    Raises `ValueError` for JSON nested too deeply to parse.
    """
    try:
        return strict_json(text)
    except RecursionError:
        raise ValueError(_TOO_DEEP) from None
    except ValueError:
        return text


def strict_json(text: str) -> Any:
    """`json.loads` without Python's extensions: `NaN` and `Infinity` are not JSON."""
    return json.loads(text, parse_constant=_not_json)


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_TOO_DEEP = f"nested too deeply (inputs and state may nest {MAX_DEPTH} levels)"


def _input_pairs(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, Any]:
    """Click callback: `-i k=v` options to a mapping (a later `k` wins)."""
    pairs: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r:.80}", ctx, param)
        try:
            pairs[key.strip()] = parse_value(raw)
        except ValueError as exc:
            raise click.BadParameter(f"{key.strip()}: {exc}", ctx, param) from None
    return pairs


def json_object(ctx: click.Context, param: click.Parameter, value: str | None) -> dict[str, Any]:
    """Click callback: a JSON object option (`--inputs`, `step --state`), inline or `@file.json`."""
    if value is None:
        return {}
    text = _read_at_file(value, ctx, param) if value.startswith("@") else value
    try:
        data = strict_json(text)
    except RecursionError:
        raise click.BadParameter(_TOO_DEEP, ctx, param) from None
    except ValueError as exc:
        raise click.BadParameter(f"malformed JSON: {exc}", ctx, param) from None
    if not isinstance(data, dict):
        raise click.BadParameter(f"expected a JSON object, got {type(data).__name__}", ctx, param)
    return data


def _read_at_file(value: str, ctx: click.Context, param: click.Parameter) -> str:
    path = Path(value[1:])
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise click.BadParameter(f"cannot read {str(path)!r}: {reason}", ctx, param) from None


def input_options(func: F) -> F:
    """Add `-i/--input k=v` (as `input_pairs`) and `--inputs JSON|@file` (as `inputs_json`)."""
    func = click.option(
        "--inputs",
        "inputs_json",
        metavar="JSON|@FILE",
        callback=json_object,
        help="Inputs as a JSON object, or @path to a JSON file.",
    )(func)
    return click.option(
        "-i",
        "--input",
        "input_pairs",
        multiple=True,
        metavar="KEY=VALUE",
        callback=_input_pairs,
        help="One input; VALUE is parsed as JSON when it parses, else kept as text. "
        "Repeatable; wins over --inputs.",
    )(func)


def merge_inputs(inputs_json: dict[str, Any], input_pairs: dict[str, Any]) -> dict[str, Any]:
    """`--inputs` overlaid with the `-i` pairs."""
    return {**inputs_json, **input_pairs}


def open_graph(ref: str, settings: Settings) -> Graph:
    """Load graph `ref` for running; not found or invalid prints why and exits 2."""
    from graphrunner.loading import inspect_graph  # the graph model: not needed for --help

    try:
        graph, report = inspect_graph(ref, settings=settings)
    except GraphNotFound as exc:
        fail(str(exc), USAGE_ERROR)
    except GraphValidationError as exc:
        graph, report = None, ValidationReport(errors=exc.issues, file=exc.source)
    except OSError as exc:
        fail(f"cannot read graph {ref!r}: {exc.strerror or exc}", USAGE_ERROR)
    if graph is None:
        for issue in report.errors:
            print_error(issue.render())
        fail(f"graph {ref!r} is invalid ({plural(len(report.errors), 'error')})", USAGE_ERROR)
    return graph


def plural(count: int, noun: str) -> str:
    """`1 node`, `3 nodes`."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
