"""The broker's visibility timeout against what a worker may hold a message for (DESIGN §4).

A step message stays unacknowledged while its node's action runs (up to the node's
`timeout`), and a retry wait or durable sleep longer than a second is a countdown message,
which the worker also holds unacknowledged until it is due. Either one longer than the
broker's `visibility_timeout` is delivered a second time while the first is still held.
At start-up a worker checks the graphs on GRAPHRUNNER_GRAPH_PATH; while it runs, it checks
each graph (once per content hash) before its first step there.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from graphrunner.errors import GraphrunnerError
from graphrunner.loading import parse_spec
from graphrunner.loading.locate import SUFFIXES
from graphrunner.model import DEFAULT_RETRY, ActionNode, ForeachNode, GraphSpec
from graphrunner.settings import Settings

log = logging.getLogger("graphrunner.worker")
SETTING = "GRAPHRUNNER_VISIBILITY_TIMEOUT"


@dataclass(frozen=True)
class Hold:
    """How long a node may keep a message unacknowledged: `what` is `timeout` or `retry wait`."""

    graph_id: str
    node: str | None  # None: the default retry policy, whatever the graph
    what: str
    seconds: float

    def where(self) -> str:
        """`node 'fetch' of graph 'g'`, or `the default retry policy`."""
        if self.node is None:
            return "the default retry policy"
        return f"node '{self.node}' of graph '{self.graph_id}'"


def holds(spec: GraphSpec) -> list[Hold]:
    """The node timeouts, and each node's longest retry wait (`max_delay`, default policy included)."""
    found = []
    for name, node in spec.nodes.items():
        if not isinstance(node, ActionNode | ForeachNode):
            continue
        if node.timeout is not None:
            found.append(Hold(spec.id, name, "timeout", float(node.timeout)))
        policies = node.retry if node.retry is not None else DEFAULT_RETRY
        waits = [p.max_delay for p in policies if p.max_attempts > 1]
        if waits:
            found.append(Hold(spec.id, name, "retry wait", float(max(waits))))
    return found


def default_holds() -> list[Hold]:
    """The retry wait of the default policy, which every node without `retry` uses."""
    return [Hold("", None, "retry wait", float(p.max_delay)) for p in DEFAULT_RETRY if p.max_attempts > 1]


def too_long(found: Iterable[Hold], visibility_timeout: float) -> list[str]:
    """One warning for the longest timeout and one for the longest retry wait not under the timeout."""
    warnings = []
    for what in ("timeout", "retry wait"):
        over = [h for h in found if h.what == what and h.seconds >= visibility_timeout]
        over.sort(key=lambda h: -h.seconds)
        if over:
            warnings.append(_warning(over[0], len(over) - 1, visibility_timeout))
    return warnings


def _warning(hold: Hold, others: int, visibility_timeout: float) -> str:
    more = f" (and {others} more)" if others else ""
    return (
        f"the broker's visibility timeout of {visibility_timeout:g}s ({SETTING}) is not longer than "
        f"the {hold.what} of {hold.seconds:g}s of {hold.where()}{more}: its step message can be "
        f"delivered a second time while it is still held; set {SETTING} above {hold.seconds:g}"
    )


def graph_files(settings: Settings) -> Iterator[tuple[str, GraphSpec]]:
    """The graphs on the graph path (file, spec); files that are not valid graphs are skipped."""
    for folder in settings.graph_path:
        if not folder.is_dir():
            continue
        for suffix in SUFFIXES:
            for path in sorted(folder.rglob(f"*{suffix}")):
                try:
                    if path.stat().st_size > settings.max_graph_bytes:
                        continue
                    yield str(path), parse_spec(path.read_text(encoding="utf-8"), str(path))
                except (OSError, UnicodeDecodeError, GraphrunnerError) as exc:
                    log.debug("visibility check: %s skipped (%s)", path, exc)


def startup_warnings(settings: Settings) -> list[str]:
    """What a worker starting with `settings` should warn about its visibility timeout."""
    found = default_holds()
    for _, spec in graph_files(settings):
        found += holds(spec)
    return too_long(found, settings.visibility_timeout)


def check_at_startup(settings: Settings) -> list[str]:
    """Log (WARNING) each startup warning; returns them."""
    warnings = startup_warnings(settings)
    for message in warnings:
        log.warning("%s", message)
    return warnings


class VisibilityCheck:
    """Warns once per graph content hash when a graph's nodes may outlast the visibility timeout."""

    def __init__(self, visibility_timeout: float | None) -> None:
        self.visibility_timeout = visibility_timeout
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def check(self, content_hash: str, spec: GraphSpec) -> None:
        """Log the warnings for `spec` the first time its content hash is seen."""
        if self.visibility_timeout is None or content_hash in self._seen:
            return
        with self._lock:
            if content_hash in self._seen:
                return
            self._seen.add(content_hash)
        for message in too_long(holds(spec), self.visibility_timeout):
            log.warning("%s", message)
