"""Graph definitions by content hash: stored at submit, compiled once per worker process.

A definition lists the content hashes of the graphs its subgraph nodes name, and those
are stored too, so a worker runs a child graph of the version its parent was submitted
with, without reading graph files.
"""

from __future__ import annotations

import threading
from typing import Any

from graphrunner.compiled import CompiledGraph
from graphrunner.errors import GraphNotFound
from graphrunner.graph import Graph
from graphrunner.loading import parse_graph, parse_spec
from graphrunner.model import GraphSpec
from graphrunner.store import Store


def definition(graph: Graph, children: dict[str, str]) -> dict[str, Any]:
    """What is stored for a graph: its id, YAML text, file name and child graph hashes."""
    return {"id": graph.id, "text": graph.text, "file": graph.file, "children": children}


class GraphCache:
    """Compiled graphs by content hash, loaded from the store on first use."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._graphs: dict[str, CompiledGraph] = {}
        self._children: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()

    def get(self, content_hash: str) -> CompiledGraph:
        """The graph a run is pinned to; raises `GraphNotFound` if its definition is gone."""
        graph = self._graphs.get(content_hash)
        if graph is not None:
            return graph
        stored = self.store.load_graph(content_hash)
        if stored is None:
            raise GraphNotFound(f"graph definition {content_hash[:12]} is not in the store")
        children = dict(stored.get("children") or {})
        graph = parse_graph(
            stored["text"],
            file=stored.get("file"),
            children=self._specs(children),
            default_id=stored.get("id"),
        )
        with self._lock:
            self._graphs[content_hash] = graph
            self._children[content_hash] = children
        return graph

    def _specs(self, children: dict[str, str]) -> dict[str, GraphSpec]:
        """The specs of stored child graphs by id (what validating their parent needs)."""
        specs = {}
        for graph_id, content_hash in children.items():
            stored = self.store.load_graph(content_hash)
            if stored is not None:
                specs[graph_id] = parse_spec(stored["text"], stored.get("file"), stored.get("id"))
        return specs

    def child(self, parent: CompiledGraph, graph_id: str) -> CompiledGraph:
        """The graph `graph_id` that a subgraph node of `parent` runs, as stored with `parent`."""
        self.get(parent.content_hash)
        content_hash = self._children.get(parent.content_hash, {}).get(graph_id)
        if content_hash is None:
            return parent.subgraph(graph_id)  # stored before children were recorded
        return self.get(content_hash)

    def put(self, graph: Graph) -> None:
        """Store a graph's definition and its subgraphs' (once per content hash), kept compiled."""
        if graph.content_hash not in self._graphs:  # known here: stored (or read from the store) before
            self._put(graph, set())

    def _put(self, graph: Graph, seen: set[str]) -> None:
        seen.add(graph.content_hash)
        children: dict[str, str] = {}
        for graph_id in graph.child_paths:
            child = graph.subgraph(graph_id)
            assert isinstance(child, Graph), f"subgraph {graph_id} was not loaded from YAML"
            children[graph_id] = child.content_hash
            if child.content_hash not in seen:
                self._put(child, seen)
        self.store.save_graph(graph.content_hash, definition(graph, children))
        with self._lock:
            self._graphs[graph.content_hash] = graph
            self._children[graph.content_hash] = children
