"""Loading graphs from YAML files or graph ids."""

from graphrunner.loading.loader import content_hash, inspect_graph, load_graph, parse_graph, parse_spec
from graphrunner.loading.locate import find_graph

__all__ = ["content_hash", "find_graph", "inspect_graph", "load_graph", "parse_graph", "parse_spec"]
