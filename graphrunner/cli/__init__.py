"""The `graphrunner` console script: a click group with one module per command.

Every command module is imported for `graphrunner --help`, so at import a module needs
only click, the settings and the errors: Celery, redis-py, the client and the graph model
are imported inside the commands that use them (tests/unit/test_import_graph.py checks).
"""

from __future__ import annotations

import click

from graphrunner import __version__
from graphrunner.cli.alive import alive
from graphrunner.cli.common import USAGE_ERROR, fail
from graphrunner.cli.control import ping, purge
from graphrunner.cli.flower import flower
from graphrunner.cli.operator import cancel, queues, sweep
from graphrunner.cli.render import render
from graphrunner.cli.run import run
from graphrunner.cli.runs import fork, resume, state, status, steps, submit, wait, watch
from graphrunner.cli.runs_list import list_runs
from graphrunner.cli.schedules import schedule
from graphrunner.cli.schema import schema
from graphrunner.cli.step import step
from graphrunner.cli.ui import ui
from graphrunner.cli.validate import validate
from graphrunner.cli.worker import beat, worker
from graphrunner.errors import ConfigurationError


class Commands(click.Group):
    """The command group: a deployment misconfigured (a tool plugin that does not load, a bad
    GRAPHRUNNER_RYE_TOOLS) is a usage error with its message, never a traceback."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except ConfigurationError as exc:
            fail(str(exc), USAGE_ERROR)


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="graphrunner")
def main() -> None:
    """graphrunner: run declarative state graphs written in YAML.

    GRAPH is a path to a YAML file or a graph id found on GRAPHRUNNER_GRAPH_PATH.
    Progress goes to stderr, results to stdout; GRAPHRUNNER_QUIET=1 silences progress.
    """


main.add_command(run)
main.add_command(submit)
main.add_command(status)
main.add_command(wait)
main.add_command(watch)
main.add_command(cancel)
main.add_command(resume)
main.add_command(sweep)
main.add_command(state)
main.add_command(fork)
main.add_command(steps)
main.add_command(step)
main.add_command(list_runs)
main.add_command(validate)
main.add_command(render)
main.add_command(schema)
main.add_command(worker)
main.add_command(flower)
main.add_command(beat)
main.add_command(queues)
main.add_command(purge)
main.add_command(ping)
main.add_command(alive)
main.add_command(ui)
main.add_command(schedule)

__all__ = ["main"]
