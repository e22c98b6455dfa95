"""A Rye graph file as graphrunner's own graph document, and where each part was written.

A Rye graph tool is an envelope (`version`, `tool_type: graph`, `executor_id`, `category`,
`description`, `tool_id`, `config_schema`, `permissions`) around the graph under `config:`
(`start`, `max_steps`, `on_error`, `hooks`, `env_requires`, `state`, `nodes`). `translate`
moves each part to where graphrunner's model has it; `relocate` maps a location in the
translated document back to the one the author wrote, so every error points at the file's
own line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graphrunner.report import Issue
from graphrunner.rye.conditions import walker_condition, walker_next
from graphrunner.rye.permissions import capability_problem
from graphrunner.rye.schema import SchemaError, inputs_of

WALKER_MAX_STEPS = 100  # the walker's default when `config.max_steps` is not written
RUNTIMES = ("rye/core/runtimes/state-graph", "rye/core/runtimes/state_graph")  # executor_id prefixes
ENVELOPE = {"version", "tool_type", "executor_id", "category", "description", "tool_id"} | {
    "config_schema",
    "permissions",
}
GRAPH_TOOL = "graphs/"  # `tool:graphs/<id>` runs another graph as a tool: a subgraph node here
EXECUTION_PARAMS = ("capabilities", "depth")  # the walker's, on a graph-tool call: not child inputs
NATIVE_ONLY = ("nodes", "state", "inputs", "id", "hooks")  # graphrunner's keys: not beside a Rye `config`
CONFIG_KEYS = {
    "start": "start",
    "max_steps": "max_steps",
    "on_error": "error_mode",
    "env_requires": "env_requires",
}
# translated location prefix -> authored location prefix, the longest first
PLACES = (
    ("config.error_mode", "config.on_error"),
    ("inputs", "config_schema.properties"),
    ("state", "config.state"),
    ("nodes", "config.nodes"),
    ("id", "tool_id"),
)


class RyeFileError(Exception):
    """The file is a Rye graph file that cannot be translated (carries located issues)."""

    def __init__(self, issues: list[Issue]) -> None:
        super().__init__("; ".join(i.message for i in issues))
        self.issues = issues


@dataclass
class Translation:
    """graphrunner's document for a Rye file, and what was noted (warnings) on the way."""

    data: dict[str, Any]
    notes: list[Issue] = field(default_factory=list)


def translate(data: dict[str, Any], default_id: str | None) -> Translation:
    """graphrunner's document for the Rye graph file `data`; raises `RyeFileError`."""
    notes: list[Issue] = []
    _check_envelope(data, notes)
    config = data.get("config")
    if not isinstance(config, dict):
        raise _error(
            "rye_missing_config", "a Rye graph file keeps its graph under 'config:' (a mapping)", "config"
        )
    native: dict[str, Any] = {"id": data.get("tool_id") or default_id or "graph", "dialect": "rye"}
    for key in ("version", "description"):
        if key in data:
            native[key] = data[key]
    try:
        native["inputs"] = inputs_of(data["config_schema"], notes) if "config_schema" in data else {}
    except SchemaError as exc:
        raise RyeFileError([exc.issue]) from None
    if "permissions" in data:
        native["permissions"] = _permissions(data["permissions"])
    native["state"] = _state(config.get("state", {}))
    native["config"] = _config(config)
    native["nodes"] = _nodes(config.get("nodes"))
    return Translation(native, notes)


def relocate(location: str | None) -> str | None:
    """Where a location of the translated document was written in the Rye file."""
    if location is None:
        return None
    if location.startswith("config.hooks.") and ".when" in location:
        location = location.replace(".when", ".condition", 1)
    if location.endswith(".action.tool"):
        location = location[: -len("tool")] + "item_id"  # the Rye id, as `Action` reads it
    for native, authored in PLACES:
        if location == native or location.startswith(native + "."):
            return authored + location[len(native) :]
    return location


def _check_envelope(data: dict[str, Any], notes: list[Issue]) -> None:
    mixed = [k for k in NATIVE_ONLY if k in data]
    if mixed:
        raise _error(
            "rye_mixed_forms",
            f"a Rye graph file keeps its graph under 'config:', but {', '.join(repr(k) for k in mixed)} "
            "is written at the top level as in a graphrunner file: move it under config (nodes, state, "
            "hooks) or write the file in one format",
            mixed[0],
        )
    if data.get("tool_type", "graph") != "graph":
        raise _error(
            "rye_not_a_graph",
            f"tool_type is {data['tool_type']!r}: only Rye graph tools run here",
            "tool_type",
        )
    executor = data.get("executor_id")
    if isinstance(executor, str) and not executor.startswith(RUNTIMES):
        notes.append(
            _note(
                f"executor_id {executor!r} is not the state-graph runtime; graphrunner runs the graph itself",
                "executor_id",
            )
        )
    for key in sorted(set(data) - ENVELOPE - {"config"}):
        notes.append(_note(f"{key!r} has no meaning in graphrunner and is ignored", key))
    if "category" in data:
        notes.append(_note("'category' (where Rye files the tool) has no meaning in graphrunner", "category"))


def _permissions(permissions: Any) -> list[str]:
    """The file's capability strings, each checked: a malformed one is a located error."""
    if not isinstance(permissions, list):
        raise _error(
            "rye_bad_permissions",
            f"permissions must be a list of Rye capabilities (rye.<primary>.<item_type>.<dotted.id>), "
            f"got {type(permissions).__name__}",
            "permissions",
        )
    for index, entry in enumerate(permissions):
        problem = capability_problem(entry)
        if problem is not None:
            raise _error("rye_bad_permissions", f"permission {index}: {problem}", f"permissions.{index}")
    return permissions


def _state(state: Any) -> Any:
    """The walker's initial state values (`config.state`) as declared fields with those defaults."""
    if not isinstance(state, dict):
        return state  # the model reports the wrong shape
    return {name: {"default": value} for name, value in state.items()}


def _config(config: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"max_steps": WALKER_MAX_STEPS}
    for key, value in config.items():
        if key in ("nodes", "state"):
            continue
        if key == "hooks":
            out["hooks"] = [_hook(h) for h in value] if isinstance(value, list) else value
        else:
            out[CONFIG_KEYS.get(key, key)] = value
    return out


def _hook(hook: Any) -> Any:
    """Rye writes a hook's condition as `condition:`; graphrunner as `when:`."""
    if isinstance(hook, dict) and "condition" in hook and "when" not in hook:
        rest = {k: v for k, v in hook.items() if k != "condition"}
        return {**rest, "when": walker_condition(hook["condition"])}
    return hook


def _nodes(nodes: Any) -> Any:
    if not isinstance(nodes, dict):
        raise _error(
            "rye_missing_config", "a Rye graph file needs 'config.nodes' (a mapping of nodes)", "config.nodes"
        )
    return {name: _node(node) for name, node in nodes.items()}


def _node(node: Any) -> Any:
    """`cache: true` is the walker's `cache_result: true`; an action running `tool:graphs/<id>`
    is a subgraph node, its params the child's inputs but for the walker's execution parameters
    `capabilities` and `depth`, which narrow the child run."""
    if isinstance(node, dict) and "cache" in node and "cache_result" not in node:
        node = {("cache_result" if k == "cache" else k): v for k, v in node.items()}
    if isinstance(node, dict) and "next" in node:
        node = {**node, "next": walker_next(node["next"])}
    graph = _graph_tool(node)
    if graph is None:
        return node
    rest = {k: v for k, v in node.items() if k not in ("action", "type", "node_type", "cache_result")}
    params = node["action"].get("params") or {}
    if not isinstance(params, dict):
        return {"type": "subgraph", "graph": graph, "inputs": params, "outputs": {}, **rest}
    inputs = {k: v for k, v in params.items() if k not in EXECUTION_PARAMS}
    execution = {k: params[k] for k in EXECUTION_PARAMS if k in params}  # narrow the child run
    return {"type": "subgraph", "graph": graph, "inputs": inputs, "outputs": {}, **execution, **rest}


def _graph_tool(node: Any) -> str | None:
    """The graph id an action node runs as a tool (`item_id: tool:graphs/<id>`), else None."""
    if not isinstance(node, dict) or node.get("type", node.get("node_type", "action")) != "action":
        return None
    action = node.get("action")
    if not isinstance(action, dict) or action.get("item_type", "tool") != "tool":
        return None
    item_id = action.get("item_id")
    if not isinstance(item_id, str):
        return None
    item_id = item_id.removeprefix("tool:")
    return item_id[len(GRAPH_TOOL) :] or None if item_id.startswith(GRAPH_TOOL) else None


def _note(message: str, location: str) -> Issue:
    return Issue("rye_ignored_key", message, location=location)


def _error(code: str, message: str, location: str) -> RyeFileError:
    return RyeFileError([Issue(code, message, location=location)])
