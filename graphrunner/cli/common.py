"""Helpers shared by the CLI commands: JSON and error output, settings, the options several take
(`-i`/`--inputs` parsed, `--capability`, `--traceback`), text and times."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from graphrunner.errors import ConfigurationError, GraphNotFound, GraphValidationError
from graphrunner.limits import MAX_DEPTH
from graphrunner.report import ValidationReport
from graphrunner.settings import Settings
from graphrunner.text import SURROGATE

if TYPE_CHECKING:
    from graphrunner.graph import Graph

USAGE_ERROR = 2
F = TypeVar("F", bound=Callable[..., Any])
# a command that passes its arguments to another program (`worker`, `flower`) and prints its help
OWN_HELP = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}


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


def _input_pairs(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    """Click callback: `-i k=v` options to a mapping of text (a later `k` wins); typed by `merge_inputs`."""
    pairs: dict[str, str] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r:.80}", ctx, param)
        pairs[key.strip()] = raw
    return pairs


INTEGER = re.compile(r"^[+-]?\d+$")
NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
BOOLEANS = {"true": True, "false": False}  # any case: the graph file's `true`, `True`, `TRUE`
EXPECTED = {"integer": "an integer", "number": "a finite number", "boolean": "true or false"}


def coerce_input(name: str, text: str, declared: str | None) -> Any:
    """The value of `-i name=text` for an input declared of type `declared` (None: not declared).

    A string input takes the text as written; an integer, number or boolean input reads the
    text as that type; any other input (list, object, any, not declared) takes the text parsed
    as JSON when it parses, else the text. Raises `ValueError` naming the input and the type.
    """
    if declared == "string":
        return text
    if declared not in EXPECTED:
        try:
            return parse_value(text)
        except ValueError as exc:
            raise ValueError(f"input '{name}': {exc}") from None
    value = _typed(text.strip(), declared)
    if value is None:
        raise ValueError(
            f"input '{name}' is declared {declared}, and {text!r:.80} is not {EXPECTED[declared]}"
        )
    return value


def _typed(text: str, declared: str) -> int | float | bool | None:
    """`text` read as an integer, number or boolean; None when it is not one."""
    if declared == "boolean":
        return BOOLEANS.get(text.lower())
    if INTEGER.match(text):
        try:
            return int(text)
        except ValueError:  # more digits than Python reads
            return None
    if declared == "number" and NUMBER.match(text):
        value = float(text)
        return value if math.isfinite(value) else None
    return None


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


INPUT_HELP = (
    "One input, converted to its declared type: a string input takes VALUE as written "
    "(-i name=42 is the text '42'); an integer, number or boolean input reads VALUE as that type "
    "(true or false); a list, object or any input, or one not declared, takes VALUE as JSON when "
    "it parses, else as text. Repeatable; wins over --inputs."
)


def input_options(func: F) -> F:
    """Add `-i/--input k=v` (as `input_pairs`) and `--inputs JSON|@file` (as `inputs_json`)."""
    func = click.option(
        "--inputs",
        "inputs_json",
        metavar="JSON|@FILE",
        callback=json_object,
        help="Inputs as a JSON object, or @path to a JSON file; its values are taken as they are.",
    )(func)
    return click.option(
        "-i",
        "--input",
        "input_pairs",
        multiple=True,
        metavar="KEY=VALUE",
        callback=_input_pairs,
        help=INPUT_HELP,
    )(func)


def capability_option(func: F) -> F:
    """Add `--capability PATTERN` (repeatable, as `capabilities`)."""
    return click.option(
        "--capability",
        "capabilities",
        multiple=True,
        metavar="PATTERN",
        help="A capability of the run: an fnmatch pattern over tool:NAME, tool:python:MODULE.FN or "
        "graph:ID, or in Rye's format rye.execute.tool.DOTTED.ID. Repeatable; without it the run gets "
        "GRAPHRUNNER_DEFAULT_CAPABILITIES, which when unset is the pure built-ins (tool:echo, tool:fail, "
        "tool:sleep) for a run on a cluster and '*' for a local run (--in-process, or the embedded Redis "
        "of `run` without GRAPHRUNNER_REDIS_URL): see docs/security.md.",
    )(func)


def chosen(capabilities: Sequence[str]) -> list[str] | None:
    """The `--capability` patterns given, or None for the deployment's default."""
    return list(capabilities) or None


def traceback_option(func: F) -> F:
    """Add `--traceback` (as `tracebacks`)."""
    return click.option(
        "--traceback",
        "tracebacks",
        is_flag=True,
        help="Print the traceback of each failed step (a Python tool's exception) under its progress line.",
    )(func)


def merge_inputs(inputs_json: dict[str, Any], input_pairs: Mapping[str, str], graph: Graph) -> dict[str, Any]:
    """`--inputs` overlaid with the `-i` pairs, each converted to the type `graph` declares for it.

    A pair that does not read as its type is a usage error (exit 2) naming the input and the type.
    """
    declared = {name: fld.type for name, fld in graph.spec.inputs.items()}
    typed = {}
    for name, text in input_pairs.items():
        try:
            typed[name] = coerce_input(name, text, declared.get(name))
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'-i' / '--input'") from None
    return {**inputs_json, **typed}


def open_graph(ref: str, settings: Settings) -> Graph:
    """Load graph `ref` for running; not found or invalid prints why and exits 2."""
    graph, report = inspected(ref, settings)
    if graph is None:
        refuse_invalid(ref, report)
    return graph


def inspected(ref: str, settings: Settings) -> tuple[Graph | None, ValidationReport]:
    """Graph `ref` (None when it does not validate) and its report; not found or unreadable prints
    why and exits 2."""
    from graphrunner.loading import inspect_graph  # the graph model: not needed for --help

    try:
        return inspect_graph(ref, settings=settings)
    except GraphNotFound as exc:
        fail(str(exc), USAGE_ERROR)
    except GraphValidationError as exc:  # unreadable text: too large, not UTF-8
        return None, ValidationReport(errors=exc.issues, file=exc.source)
    except OSError as exc:
        fail(f"cannot read graph {ref!r}: {exc.strerror or exc}", USAGE_ERROR)


def refuse_invalid(ref: str, report: ValidationReport) -> NoReturn:
    """Print the errors of graph `ref` and exit 2."""
    for issue in report.errors:
        print_error(issue.render())
    fail(f"graph {ref!r} is invalid ({plural(len(report.errors), 'error')})", USAGE_ERROR)


def plural(count: int, noun: str) -> str:
    """`1 node`, `3 nodes`."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def indented(text: str, prefix: str = "    ") -> str:
    """`text` with every line indented by `prefix`."""
    return "\n".join(prefix + line for line in text.splitlines())


def iso_time(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC, to the second: `2024-05-01T12:00:00Z`."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_up_telemetry(role: str, *, required: bool = True) -> None:
    """Set up OpenTelemetry for this command's process (`role`: run, ui, cli) as OTEL_* asks; a
    setting that cannot work exits with a usage error naming it (a warning when not `required`:
    an operator's command does not stop for its tracing)."""
    from graphrunner.telemetry import sdk

    try:
        sdk.configure(role)
    except ConfigurationError as exc:
        if required:
            fail(str(exc), USAGE_ERROR)
        click.echo(f"warning: {exc}; not traced", err=True)
