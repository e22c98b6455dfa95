"""YAML text to plain data, with the line of every key and strict limits.

Repeated keys are errors; booleans are YAML 1.2's (`on:` stays a string key); dates stay
strings; files, nesting depth and alias expansion are bounded so hostile input fails fast.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, NoReturn

import yaml

from graphrunner.errors import GraphValidationError
from graphrunner.limits import INT_LIMIT, MAX_INT_DIGITS
from graphrunner.report import Issue
from graphrunner.text import SURROGATE

MAX_DEPTH = 64
MAX_NODES = 200_000
Path = tuple[str | int, ...]


class GraphYamlLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 booleans, timestamps kept as text, and integers Python can print."""

    def construct_yaml_timestamp(self, node: yaml.Node) -> Any:
        return self.construct_scalar(node)

    def construct_scalar(self, node: yaml.Node) -> Any:
        """A scalar; escaped surrogate pairs (`"\\ud83d\\udca5"`) are joined, an unpaired one is an error."""
        value = super().construct_scalar(node)  # type: ignore[arg-type]
        if isinstance(value, str) and SURROGATE.search(value):
            return _joined_pairs(value, node)
        return value

    def construct_yaml_int(self, node: yaml.Node) -> Any:
        """An integer; one of more than MAX_INT_DIGITS digits is a YAML error at its line."""
        try:
            value = super().construct_yaml_int(node)  # type: ignore[arg-type]
        except ValueError:  # decimal text over Python's int-string limit
            value = None
        if value is None or abs(value) >= INT_LIMIT:
            raise yaml.constructor.ConstructorError(
                None, None, f"an integer of more than {MAX_INT_DIGITS} digits is too long", node.start_mark
            )
        return value


def _joined_pairs(value: str, node: yaml.Node) -> str:
    """`value` with its surrogate pairs joined into characters; raises on an unpaired surrogate."""
    try:
        return value.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeDecodeError:
        lone = SURROGATE.search(value)
        code = f"\\u{ord(lone.group()):04x}" if lone else "?"
        problem = f"a string holds an unpaired surrogate {code}, which is not valid Unicode"
        raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark) from None


GraphYamlLoader.yaml_implicit_resolvers = {
    key: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
GraphYamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
GraphYamlLoader.add_constructor("tag:yaml.org,2002:timestamp", GraphYamlLoader.construct_yaml_timestamp)
GraphYamlLoader.add_constructor("tag:yaml.org,2002:int", GraphYamlLoader.construct_yaml_int)


@dataclass
class YamlDocument:
    """Parsed data and the 1-based line of each key path."""

    data: Any
    lines: dict[Path, int] = field(default_factory=dict)

    def line_of(self, path: Path) -> int | None:
        """The line of `path`, or of its nearest ancestor that has one."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(tuple(path[:end]))
            if line is not None:
                return line
        return None


def parse_yaml(text: str, file: str | None = None) -> YamlDocument:
    """Parse one YAML document; raise `GraphValidationError` with file and line on bad input."""
    try:
        loader = GraphYamlLoader(text)
    except yaml.YAMLError as exc:
        _yaml_error(exc, file, text)
    try:
        root = _compose(loader, file)
        if root is None:
            _fail("invalid_yaml", "the document is empty", file, 1)
        assert root is not None
        walker = _Walker(file)
        walker.walk(root, (), 0)
        if walker.issues:
            raise GraphValidationError(walker.issues, file)
        data = loader.construct_document(root)
    except yaml.YAMLError as exc:
        _yaml_error(exc, file, text)
    finally:
        loader.dispose()
    return YamlDocument(data, walker.lines)


def _compose(loader: GraphYamlLoader, file: str | None) -> yaml.Node | None:
    try:
        return loader.get_single_node()
    except RecursionError:
        _fail("invalid_yaml", f"YAML nested too deeply (more than {MAX_DEPTH} levels)", file, None)


def _yaml_error(exc: yaml.YAMLError, file: str | None, text: str = "") -> NoReturn:
    """A PyYAML error as an `invalid_yaml` issue with its line."""
    line = None
    problem = str(exc)
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or problem
        if exc.context_mark and exc.problem_mark and exc.context_mark.line != exc.problem_mark.line:
            problem += f" (the construct started on line {exc.context_mark.line + 1})"
    elif isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        problem = f"character #x{exc.character:04x} is not allowed in YAML"
    _fail("invalid_yaml", f"malformed YAML: {problem}", file, line)


def _fail(code: str, message: str, file: str | None, line: int | None) -> NoReturn:
    raise GraphValidationError([Issue(code, message, file=file, line=line)], file)


class _Walker:
    """Records key lines, finds repeated keys, and bounds depth and size."""

    def __init__(self, file: str | None) -> None:
        self.file = file
        self.lines: dict[Path, int] = {}
        self.issues: list[Issue] = []
        self.count = 0

    def walk(self, node: yaml.Node, path: Path, depth: int) -> None:
        self.count += 1
        if depth > MAX_DEPTH:
            _fail(
                "invalid_yaml",
                f"YAML nested too deeply (more than {MAX_DEPTH} levels)",
                self.file,
                node.start_mark.line + 1,
            )
        if self.count > MAX_NODES:
            _fail(
                "invalid_yaml",
                f"YAML document too large (more than {MAX_NODES} values)",
                self.file,
                node.start_mark.line + 1,
            )
        if isinstance(node, yaml.MappingNode):
            self._mapping(node, path, depth)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                self.lines.setdefault((*path, index), item.start_mark.line + 1)
                self.walk(item, (*path, index), depth + 1)

    def _mapping(self, node: yaml.MappingNode, path: Path, depth: int) -> None:
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
            line = key_node.start_mark.line + 1
            if key in seen and key != "<<":
                self.issues.append(self._duplicate(path, key, seen[key], line))
            seen[key] = line
            self.lines.setdefault((*path, key), line)
            self.walk(value_node, (*path, key), depth + 1)

    def _duplicate(self, path: Path, key: str, first: int, line: int) -> Issue:
        node = str(path[1]) if len(path) >= 2 and path[0] == "nodes" else None
        where = ".".join(str(p) for p in (*path, key))
        return Issue(
            "duplicate_key",
            f"key '{key}' repeated at {where} (first written on line {first})",
            node=node,
            location=where,
            file=self.file,
            line=line,
        )
