"""A settled run as the commands print it (`run`, `submit --wait`, `wait`, `resume --wait`,
`status`, `step`): JSON or a summary for people, its error, and the exit code."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, NoReturn

import click

from graphrunner.cli.common import indented, print_json

if TYPE_CHECKING:
    from graphrunner.engine import RunFailure
    from graphrunner.engine.snapshot import PausedAt
    from graphrunner.results import RunResult


def print_settled(result: RunResult, as_json: bool) -> NoReturn:
    """Print a settled run's result (JSON or a summary) and exit 0 when it went well, else 1."""
    if as_json:
        print_json(result.to_dict())
    else:
        click.echo(human_summary(result))
    raise click.exceptions.Exit(0 if result.ok else 1)


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
    lines += outcome_lines(result)
    return "\n".join(lines)


def outcome_lines(result: RunResult) -> list[str]:
    """A paused run's `message:`; a failed run's `error:` and the traceback of that error, if any."""
    lines = []
    if result.status == "paused":
        lines.append(f"message: {result.message}" if result.message else "message: (none)")
        if result.paused_at is not None:
            lines.append(f"paused below: {describe_pause(result.paused_at)}")
    if result.error is not None:
        lines.append(f"error: {describe_error(result.error)}")
        if result.error.traceback:
            lines.append(indented(result.error.traceback, "  "))
    return lines


def describe_pause(where: PausedAt) -> str:
    """`child run r.1.b (branch 'b'), parked at node 'ask' of run r.1.b`."""
    label = f" (branch {where.branch!r})" if where.branch else ""
    label = f" (item {where.index})" if where.index is not None else label
    return f"child run {where.run_id}{label}, parked at node {where.node!r} of run {where.paused_run}"


def describe_error(error: RunFailure) -> str:
    """`node_exception at node 'a' (step 1): kaboom`."""
    where = f" at node {error.node!r}" if error.node else ""
    step = f" (step {error.step})" if error.step else ""
    return f"{error.type or 'error'}{where}{step}: {error.message}"
