"""Graph definitions by content hash: stored at submit, compiled once per worker process."""

from __future__ import annotations

import threading
from typing import Any

from graphrunner.errors import GraphNotFound
from graphrunner.graph import Graph
from graphrunner.loading import parse_graph
from graphrunner.store import Store


def definition(graph: Graph) -> dict[str, Any]:
    """What is stored for a graph: its id, YAML text and file name."""
    return {"id": graph.id, "text": graph.text, "file": graph.file}


class GraphCache:
    """Compiled graphs by content hash, loaded from the store on first use."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._graphs: dict[str, Graph] = {}
        self._lock = threading.Lock()

    def get(self, content_hash: str) -> Graph:
        """The graph a run is pinned to; raises `GraphNotFound` if its definition is gone."""
        graph = self._graphs.get(content_hash)
        if graph is not None:
            return graph
        stored = self.store.load_graph(content_hash)
        if stored is None:
            raise GraphNotFound(f"graph definition {content_hash[:12]} is not in the store")
        graph = parse_graph(stored["text"], file=stored.get("file"))
        with self._lock:
            self._graphs[content_hash] = graph
        return graph

    def put(self, graph: Graph) -> None:
        """Store a graph's definition (once per content hash) and keep it compiled."""
        self.store.save_graph(graph.content_hash, definition(graph))
        with self._lock:
            self._graphs[graph.content_hash] = graph
