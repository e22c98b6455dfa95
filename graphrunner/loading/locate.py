"""Find a graph: a path to a YAML file, or a graph id on `GRAPHRUNNER_GRAPH_PATH`."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from graphrunner.errors import GraphNotFound

SUFFIXES = (".yaml", ".yml")
ID_LINE = re.compile(r"""^id:\s*["']?([^"'#\s]+)["']?\s*(?:#.*)?$""", re.MULTILINE)


def find_graph(ref: str | Path, search: Iterable[Path] = ()) -> Path:
    """The file for `ref`: an existing path, else a graph id looked up on the search dirs."""
    path = Path(ref)
    if path.is_file():
        return path
    if path.suffix in SUFFIXES:
        raise GraphNotFound(f"graph file {str(ref)!r} does not exist")
    dirs = [d for d in search if d.is_dir()]
    found = find_by_id(str(ref), dirs)
    if found is None:
        where = ", ".join(str(d) for d in dirs) or "no directories (set GRAPHRUNNER_GRAPH_PATH)"
        raise GraphNotFound(f"no graph with id {str(ref)!r} on the graph path: {where}")
    return found


def find_by_id(graph_id: str, dirs: Iterable[Path]) -> Path | None:
    """`<dir>/<id>.yaml` if it exists, else the first YAML file whose `id:` is `graph_id`."""
    dirs = list(dirs)
    for d in dirs:
        for suffix in SUFFIXES:
            candidate = d / f"{graph_id}{suffix}"
            if candidate.is_file():
                return candidate
    for candidate in _yaml_files(dirs):
        if declared_id(candidate) == graph_id:
            return candidate
    return None


def graph_files(search: Iterable[Path]) -> list[Path]:
    """Every YAML file under the search dirs that exist, each once, in order."""
    return list(dict.fromkeys(_yaml_files(d for d in search if d.is_dir())))


def _yaml_files(dirs: Iterable[Path]) -> Iterator[Path]:
    for d in dirs:
        for suffix in SUFFIXES:
            yield from sorted(d.rglob(f"*{suffix}"))


def declared_id(path: Path) -> str | None:
    """The top-level `id:` of a graph file, read cheaply without parsing the whole file."""
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            head = fh.read(65536)
    except OSError:
        return None
    match = ID_LINE.search(head)
    return match.group(1) if match else None
