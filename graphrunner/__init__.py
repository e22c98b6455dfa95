"""graphrunner: declarative state graphs, run durably and in parallel on Celery and Redis.

Only the errors are imported with the package; every other public name is imported on
first use (PEP 562), so `import graphrunner` and the CLI start fast: the graph model
builds pydantic classes, CEL brings its own CLI along, the client brings Celery and redis-py.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from graphrunner.errors import (
    ExpressionError,
    GraphNotFound,
    GraphrunnerError,
    GraphValidationError,
    InvalidCapabilities,
    LimitExceeded,
    NestedTooDeeply,
    NodeError,
    NonFiniteNumber,
    PermissionDenied,
    ReducerError,
    RoutingError,
    RunError,
    StateValidationError,
    ToolError,
)

if TYPE_CHECKING:
    from graphrunner.builder import GraphBuilder
    from graphrunner.client import Client
    from graphrunner.engine import RunSnapshot, RunStatus
    from graphrunner.graph import Graph
    from graphrunner.loading import load_graph, parse_graph
    from graphrunner.model import END
    from graphrunner.report import Issue, ValidationReport
    from graphrunner.results import RunResult
    from graphrunner.tools import Tool, ToolContext, register_rye_alias, register_tool

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
    "NestedTooDeeply",
    "NodeError",
    "NonFiniteNumber",
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
    "register_rye_alias",
    "register_tool",
]

# The module each lazily imported public name comes from.
_LAZY = {
    "END": "graphrunner.model",
    "Client": "graphrunner.client",
    "Graph": "graphrunner.graph",
    "GraphBuilder": "graphrunner.builder",
    "Issue": "graphrunner.report",
    "RunResult": "graphrunner.results",
    "RunSnapshot": "graphrunner.engine",
    "RunStatus": "graphrunner.engine",
    "Tool": "graphrunner.tools",
    "ToolContext": "graphrunner.tools",
    "ValidationReport": "graphrunner.report",
    "load_graph": "graphrunner.loading",
    "parse_graph": "graphrunner.loading",
    "register_rye_alias": "graphrunner.tools",
    "register_tool": "graphrunner.tools",
}


def __getattr__(name: str) -> Any:
    """A public name of `_LAZY`, imported from its module on first use, then kept here."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'graphrunner' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the lazily imported ones included."""
    return sorted({*globals(), *__all__})
