"""graphrunner: declarative state graphs, run durably and in parallel on Celery and Redis."""

from typing import Any

from graphrunner.builder import GraphBuilder
from graphrunner.engine import RunSnapshot, RunStatus
from graphrunner.errors import (
    ExpressionError,
    GraphNotFound,
    GraphrunnerError,
    GraphValidationError,
    InvalidCapabilities,
    LimitExceeded,
    NodeError,
    PermissionDenied,
    ReducerError,
    RoutingError,
    RunError,
    StateValidationError,
    ToolError,
)
from graphrunner.graph import Graph
from graphrunner.loading import load_graph, parse_graph
from graphrunner.model import END
from graphrunner.report import Issue, ValidationReport
from graphrunner.results import RunResult
from graphrunner.tools import Tool, ToolContext, register_tool

__version__ = "0.1.0"

__all__ = [
    "END",
    "Client",
    "ExpressionError",
    "Graph",
    "GraphBuilder",
    "GraphNotFound",
    "GraphValidationError",
    "GraphrunnerError",
    "InvalidCapabilities",
    "Issue",
    "LimitExceeded",
    "NodeError",
    "PermissionDenied",
    "ReducerError",
    "RoutingError",
    "RunError",
    "RunResult",
    "RunSnapshot",
    "RunStatus",
    "StateValidationError",
    "Tool",
    "ToolContext",
    "ToolError",
    "ValidationReport",
    "load_graph",
    "parse_graph",
    "register_tool",
]


def __getattr__(name: str) -> Any:
    """`graphrunner.Client`, imported on first use (it brings in Celery and redis-py)."""
    if name == "Client":
        from graphrunner.client import Client

        return Client
    raise AttributeError(f"module 'graphrunner' has no attribute {name!r}")
