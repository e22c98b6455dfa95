"""Graph files to validated, compiled `Graph` objects."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from graphrunner.compiled import compile_hooks, compile_nodes
from graphrunner.errors import GraphNotFound, GraphValidationError
from graphrunner.graph import Graph
from graphrunner.loading.locate import find_by_id, find_graph
from graphrunner.loading.places import written_path
from graphrunner.loading.schema_errors import schema_issues
from graphrunner.loading.yaml_source import YamlDocument, parse_yaml
from graphrunner.model import GraphSpec
from graphrunner.reducers import ReducerConfigError, Reducers, build_reducer
from graphrunner.report import Issue, ValidationReport
from graphrunner.rye.detect import blank_signatures, is_rye
from graphrunner.settings import Settings
from graphrunner.tools import ToolRegistry, default_registry
from graphrunner.validation import analyse, check_spec

LOADER_KEYS = {"dialect", "permissions"}  # GraphSpec fields only a Rye file's translation sets


def load_graph(
    ref: str | Path, *, registry: ToolRegistry | None = None, settings: Settings | None = None
) -> Graph:
    """Load, validate and compile a graph file or graph id; raises `GraphValidationError`."""
    graph, report = inspect_graph(ref, registry=registry, settings=settings)
    if graph is None:
        raise GraphValidationError(report.errors, report.file)
    return graph


def inspect_graph(
    ref: str | Path,
    *,
    registry: ToolRegistry | None = None,
    settings: Settings | None = None,
    check_env: bool = False,
) -> tuple[Graph | None, ValidationReport]:
    """The graph (None when invalid) and its full validation report; raises `GraphNotFound`."""
    settings = settings or Settings.from_env()
    path = find_graph(ref, settings.graph_path)
    text = _read(path, settings.max_graph_bytes)
    default_id = path.stem if Path(ref).is_file() else str(ref)
    return _build(text, str(path), registry or default_registry(), settings, check_env, default_id)


def parse_graph(
    text: str,
    *,
    file: str | None = None,
    registry: ToolRegistry | None = None,
    settings: Settings | None = None,
    children: Mapping[str, GraphSpec] | None = None,
    default_id: str | None = None,
) -> Graph:
    """Load a graph from YAML text; raises `GraphValidationError`.

    `children` gives the specs of subgraphs by id (as stored with a submitted graph);
    other subgraphs are looked up next to `file` and on the graph path. A graph that names
    no id of its own gets `default_id`, else the file's name.
    """
    settings = settings or Settings.from_env()
    registry = registry or default_registry()
    graph, report = _build(text, file, registry, settings, False, default_id, children=children)
    if graph is None:
        raise GraphValidationError(report.errors, file)
    return graph


def _read(path: Path, limit: int) -> str:
    size = path.stat().st_size
    if size > limit:
        raise GraphValidationError(
            [
                Issue(
                    "invalid_yaml",
                    f"graph file is {size} bytes, over the {limit}-byte limit (GRAPHRUNNER_MAX_GRAPH_BYTES)",
                    file=str(path),
                )
            ],
            str(path),
        )
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise GraphValidationError(
            [Issue("invalid_yaml", f"graph file is not UTF-8 text: {exc}", file=str(path))],
            str(path),
        ) from None


def _build(
    text: str,
    file: str | None,
    registry: ToolRegistry,
    settings: Settings,
    check_env: bool,
    default_id: str | None = None,
    children: Mapping[str, GraphSpec] | None = None,
) -> tuple[Graph | None, ValidationReport]:
    report = ValidationReport(file=file)
    try:
        if len(text.encode()) > settings.max_graph_bytes:
            raise GraphValidationError([Issue("invalid_yaml", "graph text is over the size limit")], file)
        doc = parse_yaml(blank_signatures(text), file)
        notes: list[Issue] = []
        spec = _spec(doc, file, default_id, notes)
    except GraphValidationError as exc:
        report.errors = [_locate(i, None, file) for i in exc.issues]
        return None, report
    report.graph_id, report.node_count = spec.id, len(spec.nodes)
    lookup = _ChildLookup(file, settings, children)
    nodes, expr_issues = compile_nodes(spec)
    hooks, hook_issues = compile_hooks(spec.config.hooks, spec.rye)
    errors = check_spec(spec, registry.names(), lookup) + expr_issues + hook_issues
    place = _places(doc.data)
    report.errors = _by_line([_locate(place(i), doc, file) for i in errors])
    warnings = [*notes, *analyse(spec, check_env)]
    report.warnings = _by_line([_locate(place(i), doc, file) for i in warnings])
    if report.errors:
        return None, report
    graph = Graph(
        spec=spec,
        content_hash=content_hash(_identified(doc.data, spec.id)),
        file=file,
        nodes=nodes,
        hooks=hooks,
        reducers=_reducers(spec),
        report=report,
        child_paths=dict(lookup.paths),
        text=text,
        load_child=lambda path: load_graph(path, registry=registry, settings=settings),
    )
    return graph, report


def parse_spec(text: str, file: str | None = None, default_id: str | None = None) -> GraphSpec:
    """The graph model of YAML text, without compiling or validating it as a whole."""
    return _spec(parse_yaml(blank_signatures(text), file), file, default_id)


def _spec(
    doc: YamlDocument, file: str | None, default_id: str | None = None, notes: list[Issue] | None = None
) -> GraphSpec:
    """The graph model of a parsed document; without `id:` it is `default_id` or the file name.

    A Rye graph file is translated first (`graphrunner.rye`); what that notes goes to `notes`.
    """
    data = doc.data
    if not isinstance(data, dict):
        raise GraphValidationError(
            [
                Issue(
                    "invalid_schema",
                    f"a graph document must be a mapping, got {type(data).__name__}",
                    file=file,
                    line=1,
                )
            ],
            file,
        )
    fallback_id = default_id or (Path(file).stem if file else None)
    if is_rye(data):
        data = _from_rye(doc, file, fallback_id, notes if notes is not None else [])
    elif LOADER_KEYS & set(data):
        key = sorted(LOADER_KEYS & set(data))[0]
        message = (
            f"'{key}' is not written in a graphrunner file: a Rye graph file gets its dialect and "
            "permissions from its envelope; a graphrunner run gets capabilities when it is submitted"
        )
        raise GraphValidationError([_locate(Issue("invalid_schema", message, location=key), doc, file)], file)
    elif "id" not in data and fallback_id:
        data = {"id": fallback_id, **data}
    try:
        return GraphSpec.model_validate(data)
    except ValidationError as exc:
        place = _places(doc.data)
        issues = [_locate(place(i), doc, file) for i in schema_issues(exc, data)]
        raise GraphValidationError(issues, file) from None


def _from_rye(
    doc: YamlDocument, file: str | None, default_id: str | None, notes: list[Issue]
) -> dict[str, Any]:
    """graphrunner's document for a Rye graph file; raises `GraphValidationError` located in it."""
    from graphrunner.rye.translate import RyeFileError, translate

    try:
        translation = translate(doc.data, default_id)
    except RyeFileError as exc:
        raise GraphValidationError([_locate(i, doc, file) for i in exc.issues], file) from None
    notes.extend(translation.notes)
    return translation.data


def _places(data: Any) -> Callable[[Issue], Issue]:
    """Maps an issue found in the graph model to where its file wrote it (a Rye file moves parts)."""
    if not is_rye(data):
        return lambda issue: issue
    from graphrunner.rye.translate import relocate

    return lambda issue: replace(issue, location=relocate(issue.location))


def _locate(issue: Issue, doc: YamlDocument | None, file: str | None) -> Issue:
    line = issue.line
    if line is None and doc is not None and issue.location:
        parts = tuple(int(p) if p.isascii() and p.isdigit() else p for p in issue.location.split("."))
        line = doc.line_of(written_path(doc.data, parts))
    return Issue(issue.code, issue.message, issue.node, issue.location, issue.file or file, line)


def _by_line(issues: list[Issue]) -> list[Issue]:
    """Issues in the order of the file (stable for issues on the same line)."""
    return sorted(issues, key=lambda i: i.line or 0)


def _identified(data: Any, graph_id: str) -> Any:
    """The document with the id it runs under: a file that names none gets it from where it was
    found, and two such files with the same text but other ids are different graphs."""
    if isinstance(data, dict) and "id" not in data:
        return {**data, "id": graph_id}
    return data


def _reducers(spec: GraphSpec) -> Reducers:
    functions, names = {}, {}
    for name, fld in spec.state.items():
        try:
            functions[name] = build_reducer(fld.reducer)
        except ReducerConfigError:  # already reported by validation
            continue
        names[name] = fld.reducer.name
    return Reducers(functions, names)


def content_hash(data: Any) -> str:
    """sha256 of the document's canonical JSON: comments and key order do not count."""
    canonical = _json(_canonical(data))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)


def _canonical(value: Any) -> Any:
    """YAML data as JSON that sorts: keys that are not text are tagged with their type
    (`1` and `"1"` differ), sets become lists in a fixed order, whatever the hash seed."""
    if isinstance(value, dict):
        return {_key(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, set | frozenset):
        return {"!set": sorted((_canonical(v) for v in value), key=_json)}
    return value


def _key(key: Any) -> str:
    return key if isinstance(key, str) else f"!{type(key).__name__}:{key!r}"


class _ChildLookup:
    """Finds subgraph specs by id near the parent file and on the graph path."""

    def __init__(
        self, file: str | None, settings: Settings, known: Mapping[str, GraphSpec] | None = None
    ) -> None:
        self.dirs: Sequence[Path] = ([Path(file).parent] if file else []) + list(settings.graph_path)
        self.settings = settings
        self.known = known or {}
        self.paths: dict[str, str] = {}

    def __call__(self, graph_id: str) -> GraphSpec | str:
        if graph_id in self.known:
            return self.known[graph_id]
        path = find_by_id(graph_id, self.dirs)
        if path is None:
            return "no graph with that id next to this file or on GRAPHRUNNER_GRAPH_PATH"
        try:
            doc = parse_yaml(_read(path, self.settings.max_graph_bytes), str(path))
            spec = _spec(doc, str(path), graph_id)
        except (GraphValidationError, GraphNotFound, OSError) as exc:
            return f"{path} is not a valid graph: {exc}"
        self.paths[graph_id] = str(path)
        return spec
