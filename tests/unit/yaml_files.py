"""Writing YAML test fixtures to disk (imported by test modules as a plain module)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from click.testing import Result


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
