"""The tools a graph may name: built-ins, the `graphrunner.tools` entry points, registrations.

A Rye graph names a tool by its Rye item id (`rye/bash/bash`); a Rye id may be an alias of a
registered tool: declared by the tool (`rye_ids`), by a worker configuration
(`register_rye_alias`), or by the deployment (`GRAPHRUNNER_RYE_TOOLS=rye/id=tool,...`).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from importlib.metadata import entry_points

from graphrunner.errors import ConfigurationError, UnknownTool
from graphrunner.settings import Settings
from graphrunner.tools.base import Tool

ENTRY_POINT_GROUP = "graphrunner.tools"
RYE_TOOLS_SETTING = "GRAPHRUNNER_RYE_TOOLS"
DIRECTIVE = "directive:"  # the one kind prefix a Rye id keeps: a directive is the tool `directive:<id>`


@cache
def _builtin_names() -> frozenset[str]:
    from graphrunner.tools.builtin import BUILTIN_TOOLS

    return frozenset(tool.name for tool in BUILTIN_TOOLS)


def is_builtin(name: str) -> bool:
    """Whether `name` is one of graphrunner's own built-in tools (`shell`, `http`, ...)."""
    return name in _builtin_names()


def _id_problem(rye_id: object, directive_allowed: bool = True) -> str | None:
    """Why `rye_id` is not a plausible Rye id, or None."""
    if not isinstance(rye_id, str) or not rye_id.strip():
        return f"Rye id {rye_id!r} is not a non-empty string"
    if any(c.isspace() for c in rye_id):
        return f"Rye id {rye_id!r} contains whitespace"
    kind, sep, rest = rye_id.partition(":")
    if not sep or "/" in kind:
        return None
    if kind + sep == DIRECTIVE and directive_allowed:
        problem = _id_problem(rest, directive_allowed=False)
        return None if problem is None else f"{problem} (in {rye_id!r})"
    return f"Rye id {rye_id!r} has the kind prefix '{kind}:'; write it without the prefix: {rest!r}"


def _rye_ids_of(tool: Tool) -> tuple[str, ...]:
    """The Rye ids a tool declares it serves (`rye_ids`), checked to be a collection of strings."""
    ids = getattr(tool, "rye_ids", ())
    if isinstance(ids, str) or not isinstance(ids, Iterable):
        raise ConfigurationError(
            f"tool '{tool.name}': rye_ids must be a list or tuple of Rye ids, got {ids!r}"
        )
    return tuple(ids)


class ToolRegistry:
    """Tools by name, and Rye ids that are aliases of them."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._aliases: dict[str, str] = {}  # Rye id -> tool name
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        """Add or replace a tool under its name, and alias the Rye ids it declares (`rye_ids`)."""
        if not isinstance(tool, Tool):
            raise TypeError(f"{tool!r} is not a tool: it needs name, version and async run()")
        if tool.name in self._aliases:
            raise ConfigurationError(
                f"cannot register tool '{tool.name}': that name is a Rye alias of the tool "
                f"'{self._aliases[tool.name]}'"
            )
        rye_ids = _rye_ids_of(tool)
        for rye_id in rye_ids:
            self._check_alias(rye_id, tool.name, registering=True)
        self._tools[tool.name] = tool
        for rye_id in rye_ids:
            self._aliases[rye_id] = tool.name

    def alias(self, rye_id: str, tool_name: str) -> None:
        """Let the Rye id `rye_id` name the registered tool `tool_name` (or the tool an alias names).

        Raises `ConfigurationError` when the tool is not registered, or `rye_id` is not a plausible
        Rye id, is a built-in tool's or a registered tool's name, or already names another tool.
        """
        target = self._aliases.get(tool_name, tool_name)
        self._check_alias(rye_id, target)
        self._aliases[rye_id] = target

    def _check_alias(self, rye_id: str, tool_name: str, registering: bool = False) -> None:
        """Raise `ConfigurationError` when `rye_id` may not alias `tool_name`."""
        what = f"Rye id '{rye_id}' for tool '{tool_name}'"
        problem = _id_problem(rye_id)
        if problem is not None:
            raise ConfigurationError(f"{what}: {problem}")
        if is_builtin(rye_id):
            raise ConfigurationError(f"{what}: '{rye_id}' collides with the built-in tool '{rye_id}'")
        if not registering and tool_name not in self._tools:
            known = ", ".join(sorted(self._tools)) or "(none)"
            raise ConfigurationError(
                f"{what}: no tool '{tool_name}' is registered; registered tools: {known}"
            )
        if rye_id in self._tools or rye_id == tool_name:
            raise ConfigurationError(
                f"{what}: '{rye_id}' is the name of a registered tool; register your tool under "
                "that name to replace it"
            )
        current = self._aliases.get(rye_id)
        if current is not None and current != tool_name:
            raise ConfigurationError(f"{what}: '{rye_id}' already names the tool '{current}'")

    def get(self, name: str) -> Tool:
        """The tool called `name`, or that the Rye id `name` names; raises `UnknownTool`."""
        try:
            return self._tools[self._aliases.get(name, name)]
        except KeyError:
            known = ", ".join(sorted(self._tools))
            aliases = f"; Rye ids: {', '.join(sorted(self._aliases))}" if self._aliases else ""
            raise UnknownTool(f"unknown tool '{name}'; registered tools: {known}{aliases}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._tools or name in self._aliases

    def names(self) -> list[str]:
        """Every registered tool name and Rye alias, sorted."""
        return sorted({*self._tools, *self._aliases})

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


def apply_rye_mapping(registry: ToolRegistry, text: str, source: str = RYE_TOOLS_SETTING) -> None:
    """Alias each `rye/id=tool_name` of comma-separated `text` in `registry` (blank items skipped);
    a malformed pair, or one `alias` refuses, is a `ConfigurationError` naming `source` and the pair."""
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        rye_id, sep, tool_name = (side.strip() for side in item.partition("="))
        if not sep or not rye_id or not tool_name or "=" in tool_name:
            raise ConfigurationError(
                f"{source}: bad pair {item!r}; write comma-separated rye/id=tool_name pairs, "
                "e.g. rye/web/fetch=http"
            )
        try:
            registry.alias(rye_id, tool_name)
        except ConfigurationError as exc:
            raise ConfigurationError(f"{source}: pair {item!r}: {exc}") from exc


_default: ToolRegistry | None = None


def default_registry() -> ToolRegistry:
    """The process-wide registry: built-ins, Rye adapters, entry points, then the deployment's
    Rye aliases (`GRAPHRUNNER_RYE_TOOLS`); created on first use."""
    global _default
    if _default is None:
        from graphrunner.tools.builtin import BUILTIN_TOOLS, RYE_TOOLS

        registry = ToolRegistry((*BUILTIN_TOOLS, *RYE_TOOLS))
        registry.load_entry_points()
        apply_rye_mapping(registry, Settings.from_env().rye_tools)
        _default = registry
    return _default


def register_tool(tool: Tool) -> None:
    """Register a team's own tool in the process-wide registry (e.g. from a worker config)."""
    default_registry().register(tool)


def register_rye_alias(rye_id: str, tool_name: str) -> None:
    """Let the Rye id `rye_id` name the tool `tool_name` in the process-wide registry
    (e.g. from a worker config); see `ToolRegistry.alias`."""
    default_registry().alias(rye_id, tool_name)
