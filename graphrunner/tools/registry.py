"""The tools a graph may name: built-ins, the `graphrunner.tools` entry points, registrations."""

from __future__ import annotations

from collections.abc import Iterable
from importlib.metadata import entry_points

from graphrunner.errors import ConfigurationError, UnknownTool
from graphrunner.tools.base import Tool

ENTRY_POINT_GROUP = "graphrunner.tools"


class ToolRegistry:
    """Tools by name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        """Add or replace a tool under its name."""
        if not isinstance(tool, Tool):
            raise TypeError(f"{tool!r} is not a tool: it needs name, version and async run()")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool:
        """The tool called `name`; raises `UnknownTool`."""
        try:
            return self._tools[name]
        except KeyError:
            known = ", ".join(sorted(self._tools))
            raise UnknownTool(f"unknown tool '{name}'; registered tools: {known}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def names(self) -> list[str]:
        """Every registered tool name, sorted."""
        return sorted(self._tools)

    def load_entry_points(self) -> None:
        """Register every tool published under the `graphrunner.tools` entry-point group."""
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                obj = ep.load()
                self.register(obj() if isinstance(obj, type) else obj)
            except Exception as exc:  # a team's plugin that does not load
                dist = f" of {ep.dist.name}" if ep.dist else ""
                raise ConfigurationError(
                    f"tool plugin {ep.name} = {ep.value}{dist} (entry point group {ENTRY_POINT_GROUP}) "
                    f"does not load: {type(exc).__name__}: {exc}"
                ) from exc


_default: ToolRegistry | None = None


def default_registry() -> ToolRegistry:
    """The process-wide registry: built-ins plus entry points, created on first use."""
    global _default
    if _default is None:
        from graphrunner.tools.builtin import BUILTIN_TOOLS

        _default = ToolRegistry(BUILTIN_TOOLS)
        _default.load_entry_points()
    return _default


def register_tool(tool: Tool) -> None:
    """Register a team's own tool in the process-wide registry (e.g. from a worker config)."""
    default_registry().register(tool)
