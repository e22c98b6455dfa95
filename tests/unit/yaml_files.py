"""Writing YAML test fixtures to disk (imported by test modules as a plain module)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from click.testing import Result

# A two-node graph with a required input, used by the CLI tests.
HELLO = """
id: hello
inputs:
  name: {type: string, required: true}
state:
  greeting: string
config:
  start: greet
nodes:
  greet:
    action: {tool: echo, params: {text: "Hello ${inputs.name}"}}
    assign: {greeting: "${result.text}"}
    next: done
  done:
    type: return
    output: {greeting: "${state.greeting}"}
"""


def write_yaml(path: Path, text: str) -> Path:
    """Write dedented `text` to `path`, creating its directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def write(directory: Path, name: str, text: str) -> Path:
    """Write dedented `text` to `directory/name`."""
    return write_yaml(directory / name, text)


def assert_no_traceback(result: Result) -> None:
    """A user error never shows a Python traceback."""
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.stdout + result.stderr
