"""Span trees: the exported spans of one run arranged by parent, and matched against a fixture's
`span_tree` (OpenArmature's shape: names, subset attributes, status, events, children).

An expected span is a mapping:

- `name`; `status` (`OK`, `ERROR`, `UNSET`) and `status_description`;
- `attributes`: a subset of the span's, by value, by placeholder (`<run-id>`: the id of the run
  under test, its invocation and correlation id; `<any-string>`; `<hex32>`) or `{one_of: [...]}`;
- `attributes_absent`: keys the span must not have;
- `events`: the names of its events, in order; `exception_recorded: true` (OA's): one is `exception`;
- `children`: the spans under it, in any order, each matching one child, none left over (omit the
  key to leave them unchecked);
- `repeat: true` (or `optional`): one or more (or any number of) sibling spans match this entry,
  and the spans under them, together, its `children` (a cluster step that waits on child runs may
  look, and wait again, more than once: how many times, and which wait they hang under, is not fixed).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

INVOCATION = "openarmature.invocation"
HEX32 = re.compile(r"^[0-9a-f]{32}$")
# What differs between two runs of the same graph: ids, where and when (OA §10 compares the rest).
VARYING = (
    "openarmature.invocation_id",
    "openarmature.correlation_id",
    "openarmature.suspension.signal_id",
    "openarmature.suspension.metadata.due",
    "graphrunner.run.id",
    "graphrunner.worker",
    "graphrunner.queue_wait_ms",
)


@dataclass
class Node:
    """A span and the spans under it, in the order they started."""

    span: ReadableSpan
    children: list[Node] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.span.name

    @property
    def attributes(self) -> dict[str, Any]:
        return dict(self.span.attributes or {})

    def walk(self) -> Iterable[Node]:
        """This span and every span under it."""
        yield self
        for child in self.children:
            yield from child.walk()


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def run_span(spans: Sequence[ReadableSpan], run_id: str) -> ReadableSpan | None:
    """The invocation span of run `run_id`, once exported."""
    found = [
        s
        for s in spans
        if s.name == INVOCATION and (s.attributes or {}).get("openarmature.invocation_id") == run_id
    ]
    return found[0] if found else None


def trace_of(spans: Sequence[ReadableSpan], run_id: str) -> list[Node]:
    """The spans of the trace of run `run_id` as trees: the roots are those whose parent is not in
    the trace (the invocation span, or the caller's span it hangs under)."""
    root = run_span(spans, run_id)
    if root is None or root.context is None:
        return []
    ours = [s for s in spans if s.context is not None and s.context.trace_id == root.context.trace_id]
    nodes = {span_id(s): Node(s) for s in sorted(ours, key=lambda s: s.start_time or 0)}
    roots = []
    for node in nodes.values():
        parent = nodes.get(node.span.parent.span_id) if node.span.parent is not None else None
        (parent.children if parent is not None else roots).append(node)
    return roots


def mismatch(expected: Sequence[dict[str, Any]], actual: Sequence[Node], run_id: str) -> str | None:
    """Why the spans `actual` do not match the entries `expected` (None when they do)."""
    if _assign(list(expected), list(actual), run_id):
        return None
    for entry in expected:  # explain: the first entry nothing matches, or the spans left over
        if entry.get("repeat") == "optional":
            continue
        close = [n for n in actual if n.name == entry["name"]]
        if not any(_matches(entry, n, run_id) for n in close):
            if not close:
                return f"no span {entry['name']!r} among {[n.name for n in actual]}"
            return (
                _why(entry, close[0], run_id)
                or f"spans {entry['name']!r}: {len(close)} of them, not as expected"
            )
    return f"spans left over or missing among {[n.name for n in actual]}: expected {[e['name'] for e in expected]}"


def _assign(expected: list[dict[str, Any]], actual: list[Node], run_id: str) -> bool:
    """True when every entry matches its own span (a `repeat` one, one or more) and none is left."""
    once = [e for e in expected if not e.get("repeat")]
    if not once:
        return _repeated([e for e in expected if e.get("repeat")], actual, run_id)
    first, rest = once[0], [e for e in expected if e is not once[0]]
    for i, node in enumerate(actual):
        if _matches(first, node, run_id) and _assign(rest, actual[:i] + actual[i + 1 :], run_id):
            return True
    return False


def _repeated(entries: list[dict[str, Any]], actual: list[Node], run_id: str) -> bool:
    """True when each span matches one of the `repeat` entries but its children (the first that
    does), each entry gets one or more, and each entry's spans, together, have its children."""
    taken: dict[int, list[Node]] = {i: [] for i in range(len(entries))}
    for node in actual:
        heads = [i for i, e in enumerate(entries) if _why_itself(e, node, run_id) is None]
        if not heads:
            return False
        taken[heads[0]].append(node)
    for i, entry in enumerate(entries):
        under = [child for node in taken[i] for child in node.children]
        if (not taken[i] and entry["repeat"] != "optional") or (
            "children" in entry and mismatch(entry["children"], under, run_id) is not None
        ):
            return False
    return True


def _matches(entry: dict[str, Any], node: Node, run_id: str) -> bool:
    return _why(entry, node, run_id) is None


def _why(entry: dict[str, Any], node: Node, run_id: str) -> str | None:
    """Why `node` is not the span `entry` describes (None when it is)."""
    problem = _why_itself(entry, node, run_id)
    if problem is None and entry.get("children") is not None:
        below = mismatch(entry["children"], node.children, run_id)
        problem = None if below is None else f"span {node.name!r} > {below}"
    return problem


def _why_itself(entry: dict[str, Any], node: Node, run_id: str) -> str | None:
    """Why `node` itself, whatever is under it, is not the span `entry` describes."""
    where = f"span {node.name!r}"
    if node.name != entry["name"]:
        return f"{where}: not {entry['name']!r}"
    status = node.span.status
    if "status" in entry and status.status_code.name != entry["status"]:
        return f"{where}: status {status.status_code.name}, expected {entry['status']}"
    if "status_description" in entry and status.description != entry["status_description"]:
        return f"{where}: status description {status.description!r}, expected {entry['status_description']!r}"
    attributes = node.attributes
    for key, want in (entry.get("attributes") or {}).items():
        if key not in attributes or not value_matches(want, attributes[key], run_id):
            return f"{where}: {key}={attributes.get(key, '<absent>')!r}, expected {want!r}"
    present = sorted(set(entry.get("attributes_absent") or ()) & set(attributes))
    if present:
        return f"{where}: has {present}"
    events = [e.name for e in node.span.events]
    if "events" in entry and events != entry["events"]:
        return f"{where}: events {events}, expected {entry['events']}"
    if entry.get("exception_recorded") and "exception" not in events:
        return f"{where}: no exception event"
    return None


def value_matches(want: Any, got: Any, run_id: str) -> bool:
    """`got` (an attribute's value) is `want`, or what its placeholder stands for."""
    if want == "<run-id>":
        return bool(got == run_id)
    if want == "<any-string>":
        return isinstance(got, str) and got != ""
    if want == "<hex32>":
        return isinstance(got, str) and bool(HEX32.match(got))
    if isinstance(want, dict) and set(want) == {"one_of"}:
        return any(value_matches(one, got, run_id) for one in want["one_of"])
    if isinstance(want, list):
        return (
            isinstance(got, list | tuple)
            and len(got) == len(want)
            and all(map(value_matches, want, got, [run_id] * len(want)))
        )
    return bool(want == got) and type(want) is type(got)


def shape(nodes: Sequence[Node]) -> list[Any]:
    """What two runs of one graph must share (OA §10): names, status, attributes but ids and
    timing, and the same of the spans under them, in a canonical order."""
    out = []
    for node in nodes:
        attributes = {k: v for k, v in node.attributes.items() if k not in VARYING}
        out.append(
            (node.name, node.span.status.status_code.name, sorted(attributes.items()), shape(node.children))
        )
    return sorted(out, key=repr)


def outline(nodes: Sequence[Node], depth: int = 0) -> str:
    """The trees as indented lines (name, status, OA attributes), for a failure's message."""
    lines = []
    for node in nodes:
        shown = {
            k: v for k, v in node.attributes.items() if k.startswith("openarmature.") and k not in VARYING
        }
        shown.update({k: v for k, v in node.attributes.items() if k == "graphrunner.outcome"})
        lines.append(f"{'  ' * depth}{node.name} [{node.span.status.status_code.name}] {shown}")
        lines.append(outline(node.children, depth + 1))
    return "\n".join(line for line in lines if line)
