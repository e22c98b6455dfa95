"""Tools: what a node's action dispatches to."""

from graphrunner.tools.base import Defer, Tool, ToolContext, parse_params
from graphrunner.tools.policy import ToolPolicy
from graphrunner.tools.registry import (
    ToolRegistry,
    default_registry,
    register_rye_alias,
    register_tool,
)

__all__ = [
    "Defer",
    "Tool",
    "ToolContext",
    "ToolPolicy",
    "ToolRegistry",
    "default_registry",
    "parse_params",
    "register_rye_alias",
    "register_tool",
]
