"""The JSON Schema (draft 2020-12) of graph files, for editors and other tools.

It starts from `GraphSpec.model_json_schema()`, which describes the model after its
before-validators ran, and widens it to every form those validators accept as written:
`next` shorthands, one retry policy, type-name shorthands, reducer forms, Rye's
`node_type` and Rye's action form.
"""

from __future__ import annotations

import copy
from typing import Any

from graphrunner.model import NODE_NAME, GraphSpec
from graphrunner.model.state import TYPE_ALIASES

DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "https://graphrunner.dev/schema/graph.json"
TITLE = "graphrunner graph"

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    """A `$ref` to `#/$defs/<name>`."""
    return {"$ref": f"#/$defs/{name}"}


def graph_json_schema() -> Schema:
    """The JSON Schema of a graph document, accepting every form the model normalises."""
    schema = GraphSpec.model_json_schema(by_alias=True)
    defs: dict[str, Schema] = schema["$defs"]
    _type_names(schema, defs)
    _next_forms(defs)
    _retry_forms(defs)
    _reducer_forms(defs)
    _node_type_alias(schema, defs)
    _rye_actions(defs)
    _top_level(schema)
    head = {"$schema": DIALECT, "$id": SCHEMA_ID, "title": TITLE}
    return {**head, **{k: v for k, v in schema.items() if k != "title"}}


def _type_names(schema: Schema, defs: dict[str, Schema]) -> None:
    """Field types take aliases (`str`, `int`, ...); a field may be just its type name (or null)."""
    names = list(defs["InputField"]["properties"]["type"]["enum"]) + list(TYPE_ALIASES)
    defs["TypeName"] = {"type": "string", "enum": names, "description": "a field type or an alias of one"}
    for model in ("InputField", "StateField"):
        prop = defs[model]["properties"]["type"]
        prop.pop("enum", None)
        prop.pop("type", None)
        prop.update(ref("TypeName"))
    for section, model in (("inputs", "InputField"), ("state", "StateField")):
        schema["properties"][section]["additionalProperties"] = {
            "anyOf": [ref(model), ref("TypeName"), {"type": "null"}]
        }


def _next_forms(defs: dict[str, Schema]) -> None:
    """`next`: a node name, a list of branches, one branch, Rye's typed mappings, or `{fn}`."""
    branches = {"type": "array", "items": ref("Branch")}
    name = {"type": "string", "minLength": 1}
    defs["Next"] = {
        "description": defs["Next"].get("description", ""),
        "anyOf": [
            {**name, "description": "a node name or $end"},
            branches,
            ref("Branch"),
            _closed({"branches": branches}, ["branches"]),
            _closed({"type": {"const": "unconditional"}, "to": name}, ["type", "to"]),
            _closed(
                {
                    "type": {"const": "conditional"},
                    "branches": branches,
                    "default": {"anyOf": [name, {"type": "null"}]},
                },
                ["type"],
            ),
            _closed({"fn": {**name, "description": "a routing function 'pkg.module:fn'"}}, ["fn"]),
        ],
    }


def _closed(properties: Schema, required: list[str]) -> Schema:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _retry_forms(defs: dict[str, Schema]) -> None:
    """`retry`: one policy or an ordered list of policies."""
    for model in defs.values():
        prop = model.get("properties", {}).get("retry")
        if prop is not None:
            prop["anyOf"] = [
                ref("RetryPolicy"),
                {"type": "array", "items": ref("RetryPolicy")},
                {"type": "null"},
            ]


def _reducer_forms(defs: dict[str, Schema]) -> None:
    """`reducer`: a name, `{name, ...params}` inline, or `{name, params}`."""
    name = {"type": "string", "minLength": 1}
    canonical = _closed({"name": name, "params": {"type": "object"}}, ["name"])
    defs["ReducerRef"] = {
        "description": "a reducer by name with its parameters, inline or under 'params'",
        "type": "object",
        "properties": {"name": name},
        "required": ["name"],
        "additionalProperties": True,
        "if": {"required": ["params"]},
        "then": canonical,
    }
    prop = defs["StateField"]["properties"]["reducer"]
    prop.pop("$ref", None)
    prop["anyOf"] = [{**name, "description": "a reducer name"}, ref("ReducerRef")]


def _node_type_alias(schema: Schema, defs: dict[str, Schema]) -> None:
    """Rye's `node_type` means `type`: either one, not both."""
    choices = schema["properties"]["nodes"]["additionalProperties"]["oneOf"]
    for choice in choices:
        model = defs[choice["$ref"].rsplit("/", 1)[-1]]
        props = model["properties"]
        alias = {k: v for k, v in props["type"].items() if k in ("const", "type")}
        props["node_type"] = {**alias, "description": "Rye's spelling of 'type'"}
        model["not"] = {"required": ["type", "node_type"]}
        required = model.get("required", [])
        if "type" in required:
            required.remove("type")
            model["anyOf"] = [{"required": ["type"]}, {"required": ["node_type"]}]
        if not required:
            model.pop("required", None)


def _rye_actions(defs: dict[str, Schema]) -> None:
    """An action is `{tool, params}` or Rye's `{primary: execute, item_type: tool, item_id, params}`."""
    canonical = copy.deepcopy(defs["Action"])
    rye = _closed(
        {
            "primary": {"const": "execute"},
            "item_type": {"enum": ["tool", "directive"]},
            "item_id": {
                "type": "string",
                "minLength": 1,
                "description": "the tool name (a Rye id), optionally with a kind prefix: tool: or directive:",
            },
            "params": {"type": "object"},
        },
        ["item_id"],
    )
    defs["Action"] = {"description": canonical.pop("description", ""), "anyOf": [canonical, rye]}


def _top_level(schema: Schema) -> None:
    """`id` defaults to the file name; `version` may be a number; node names have a pattern."""
    props = schema["properties"]
    for key in ("dialect", "permissions"):  # set by the loader for a Rye file, never written
        props.pop(key)
    schema["required"] = [r for r in schema.get("required", []) if r != "id"]
    props["id"]["description"] = "the graph id; defaults to the file name without its suffix"
    props["version"]["anyOf"].insert(1, {"type": "number"})
    props["nodes"]["propertyNames"] = {"pattern": NODE_NAME.pattern}
