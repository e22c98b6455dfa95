"""Hypothesis strategies for the property tests: hostile values, CEL-ish expressions, and
schema-shaped graph documents (imported by test modules as a plain module).

Values stay below the nesting at which the Rust CEL library would overflow the stack when
handed them directly (about 50,000 levels); the engine refuses anything over 64 levels at
a run's entry long before that.
"""

from __future__ import annotations

import copy
import os
import re
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# -- values --------------------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "x", "items", "n", "name", "_last_error", "s"])
TEXT = st.text(max_size=12) | st.sampled_from(["", "\ud800", "é", "💥", "${state.x}", "$${x}", "0", "NaN"])
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**64), max_value=2**64)
    | st.floats(allow_nan=True, allow_infinity=True)
    | TEXT
)


def nested(levels: int, kind: str, leaf: Any = 1) -> Any:
    """`leaf` nested `levels` deep in lists or one-key mappings, built without recursion."""
    value = leaf
    for _ in range(levels):
        value = [value] if kind == "list" else {"a": value}
    return value


LEVELS = st.sampled_from([60, 64, 65, 200, 1_200, 3_000])
KINDS = st.sampled_from(["list", "dict"])
DEEP = st.builds(nested, LEVELS, KINDS)
TWINS = st.tuples(LEVELS, KINDS).map(lambda t: (nested(*t), nested(*t)))  # equal, not the same object
HUGE_VALUES = {
    "int": lambda: 10**5000,
    "negative-int": lambda: -(10**4400),
    "str": lambda: "x" * 200_000,
    "list": lambda: [0] * 20_000,
    "dict": lambda: {f"k{i}": i for i in range(5_000)},
}
# built when drawn: hypothesis could not print a strategy holding an integer that long
HUGE = st.sampled_from(sorted(HUGE_VALUES)).map(lambda kind: HUGE_VALUES[kind]())
ODD = st.sampled_from(
    [{1: "int key"}, {(1, 2): "tuple key"}, {None: 1}, {1, 2}, b"\xff\x00", object(), (1, 2), float("nan")]
)
JSONISH = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT | NAMES, inner, max_size=4),
    max_leaves=12,
)
FRIENDLY = (
    st.integers(-2, 3) | st.lists(st.integers(0, 2), max_size=3) | st.sampled_from(["", "s", 0.0, True])
)
HOSTILE = st.recursive(
    SCALARS | DEEP | HUGE | ODD,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT | NAMES, inner, max_size=3),
    max_leaves=6,
)

# -- expressions ---------------------------------------------------------------------------
# Most expressions compile: paths into the context's usual fields, small literals (0
# often), arithmetic and indexing weighted up; the rest is noise for the parser.

ATOMS = st.sampled_from(
    [
        "state",
        "inputs",
        "result",
        "state.x",
        "state.n",
        "state.items",
        "inputs.a",
        "inputs.b",
        "inputs.l",
        "result.value",
        "run.step",
        "_now",
        "_timestamp",
        "item",
        "index",
        "0",
        "0",
        "1",
        "2",
        "-1",
        "0.0",
        "2.5",
        "1u",
        "0u",
        "9223372036854775807",
        '"s"',
        "'0'",
        "true",
        "null",
        "[]",
        "[1, 2]",
        "{}",
        '{"a": 1}',
        "b'\\xff'",
    ]
)
ARITHMETIC = st.sampled_from(["+", "-", "*", "/", "%"])
BINARY = ARITHMETIC | st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "&&", "||", "in"])
FUNCTIONS = st.sampled_from(
    ["size", "int", "uint", "double", "string", "bytes", "type", "timestamp", "duration"]
)


def _extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(inner, ARITHMETIC, inner).map(" ".join),
        st.tuples(inner, BINARY, inner).map(" ".join),
        st.tuples(inner, inner).map(lambda t: f"{t[0]}[{t[1]}]"),
        st.tuples(inner, st.sampled_from(["0", "1", "2", "-1"])).map(lambda t: f"{t[0]}[{t[1]}]"),
        st.tuples(FUNCTIONS, inner).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(inner, st.sampled_from(["x", "a", "nope"])).map(lambda t: f"{t[0]}.{t[1]}"),
        st.tuples(inner, inner, inner).map(lambda t: f"{t[0]} ? {t[1]} : {t[2]}"),
        st.lists(inner, max_size=3).map(lambda xs: f"[{', '.join(xs)}]"),
        st.tuples(inner, inner).map(lambda t: f"{{{t[0]}: {t[1]}}}"),
        inner.map(lambda e: f"({e})"),
        inner.map(lambda e: f"!{e}"),
        inner.map(lambda e: f"-{e}"),
        inner.map(lambda e: f"has({e}.a)"),
        st.tuples(inner, inner).map(lambda t: f"{t[0]}.matches({t[1]})"),
        st.tuples(inner, st.sampled_from(["all", "exists", "map", "filter"]), inner).map(
            lambda t: f"{t[0]}.{t[1]}(v, {t[2]})"
        ),
    )


CEL = st.recursive(ATOMS, _extend, max_leaves=8)
LITERALS = st.one_of(
    st.integers().map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.text(alphabet='ab\\"u0d8x', max_size=8).map(lambda t: f'"{t}"'),
    st.sampled_from(["1" * 5000, '"\\x"', '"\\ud800"', '"\\ud83d\\udca5"', "true", "null", "'d'"]),
)
FALLBACKS = st.tuples(st.sampled_from(["state.x", "inputs.a", "state.items.0"]), LITERALS).map(" || ".join)
EXPRESSIONS = st.one_of(
    CEL, CEL, CEL, FALLBACKS, st.text(max_size=20), st.sampled_from(["state.items.0.name", "a ||"])
)
TEMPLATES = st.one_of(
    EXPRESSIONS.map(lambda e: "${" + e + "}"),
    EXPRESSIONS.map(lambda e: "${" + e + "}"),
    st.tuples(TEXT, EXPRESSIONS).map(lambda t: t[0] + "${" + t[1] + "}"),
    TEXT,
)
OPS = st.sampled_from(
    ["eq", "ne", "gt", "gte", "lt", "lte", "in", "not_in", "contains", "matches", "exists", "truthy", "bogus"]
)
STRUCTURED = st.fixed_dictionaries(
    {"path": st.sampled_from(["state.x", "inputs.a", "result.value", "state.items.0", "x", "1"]), "op": OPS},
    optional={
        "value": JSONISH
        | TEMPLATES
        | st.sampled_from(["(", "[a-", ".*", "${state.x}", "(" * 1000 + ")" * 1000, "a{99999999999}"])
    },
)
CONDITIONS = st.recursive(
    CEL | STRUCTURED,
    lambda inner: (
        st.dictionaries(st.sampled_from(["all", "any"]), st.lists(inner, max_size=3), min_size=1, max_size=1)
        | inner.map(lambda c: {"not": c})
    ),
    max_leaves=4,
)

# -- graph documents -----------------------------------------------------------------------
# A coherent graph (names that exist, fields that fit each node type) is drawn first, then
# zero to three perturbations put junk, hostile names or odd forms at random places, so
# that most examples get past the schema into compilation and the checks.

YAML_KEYS = TEXT | NAMES | st.integers(-2, 300) | st.none() | st.booleans() | st.floats(allow_nan=False)
YAMLISH = st.recursive(
    SCALARS | st.binary(max_size=3) | st.sets(st.integers(0, 5), max_size=3),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(YAML_KEYS, inner, max_size=4),
    max_leaves=10,
)
JUNK = st.sampled_from(
    [1.5, -1, 0, None, True, "", "²", "x[y", "$end", [], {}, [1.5], {"a": 1}, "${", "${state.x / 0}", [None]]
)
FIELD_TYPES = st.sampled_from(
    ["string", "integer", "number", "boolean", "list", "object", "any", "int", "dict"]
)
REDUCERS = st.sampled_from(
    [
        "append",
        "merge",
        "last_write_wins",
        "concat_flatten",
        "merge_all",
        "nope",
        "json:loads",
        ["append", "merge"],
        ["append"],
        [{"name": "append"}],
        {"name": "bounded_append", "max_len": 0},
        {"name": "bounded_append", "max_len": 3},
        {"name": "merge_by_key"},
        {"name": "merge_by_key", "key": "id"},
        {"name": "dedupe_append", "key": "id"},
    ]
)
BAD_REDUCERS = st.sampled_from(
    [[1.5], [None], 1.5, [{"name": 1}], [[1]], {"params": 1}, {"name": None}, [{"name": "append"}, 2]]
).map(copy.deepcopy)
BAD_NEXT = st.one_of(
    st.builds(lambda junk: {"type": "conditional", "branches": junk}, JUNK | YAMLISH),
    st.builds(lambda junk: {"type": "unconditional", "to": junk}, JUNK),
    st.builds(lambda junk: {"fn": junk}, JUNK),
    st.builds(
        lambda junk: {"type": "conditional", "branches": [], junk: 1}, st.integers() | st.none() | TEXT
    ),
    JUNK,
).map(copy.deepcopy)
FIELD_NAMES = st.lists(st.sampled_from(["x", "items", "n", "log", "meta", "s"]), max_size=4, unique=True)
NODE_KINDS = st.sampled_from(["action", "gate", "foreach", "subgraph", "pause", "return"])
RETRY = st.fixed_dictionaries(
    {}, optional={"max_attempts": st.integers(1, 3), "initial": st.just(0), "on": st.just(["transient"])}
)
HOOK = st.fixed_dictionaries(
    {"event": st.sampled_from(["after_step", "error", "graph_started"]), "action": st.just({"tool": "echo"})},
    optional={"when": CONDITIONS},
).map(lambda h: {**h, "action": {"tool": "echo", "params": {"v": "${state}"}}})


@st.composite
def graphs(draw: st.DrawFn, perturb: bool = True) -> dict[str, Any]:
    """A graph document, usually well-formed, sometimes perturbed."""
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "d", "done"]), min_size=1, max_size=5, unique=True))
    fields = draw(FIELD_NAMES)
    doc: dict[str, Any] = {
        "id": draw(st.sampled_from(["t", "team/t", "x"])),
        "config": {"start": names[0], "max_steps": draw(st.integers(1, 12))},
    }
    doc["state"] = {f: _field(draw, True, perturb) for f in fields}
    doc["inputs"] = {
        i: _field(draw, False, perturb) for i in draw(st.lists(st.sampled_from(["a", "l", "b"]), unique=True))
    }
    if draw(st.booleans()):
        doc["config"]["error_mode"] = draw(st.sampled_from(["fail", "continue"]))
    if draw(st.booleans()):
        doc["config"]["hooks"] = draw(st.lists(HOOK, max_size=2))
    chain = {name: ([*names[1:], "$end"])[i] for i, name in enumerate(names)}
    doc["nodes"] = {name: _node(draw, name, names, fields, chain[name], perturb) for name in names}
    doc = copy.deepcopy(doc)  # sampled values are shared objects: perturb a private copy
    if perturb and draw(st.integers(0, 5)) == 0:  # keys that look like pydantic's union tags
        doc[draw(st.sampled_from(["x[y", "list[...]", "str", "function-after[x]"]))] = draw(JUNK)
    if perturb and draw(st.integers(0, 5)) == 0:  # node names the schema refuses
        doc["nodes"][draw(st.sampled_from(["²", "٣", "x.y", "$end", "1", "", "a b"]))] = {"type": "return"}
    for _ in range(draw(st.integers(0, 3)) if perturb else 0):
        _perturb(draw, doc)
    return doc


def _field(draw: st.DrawFn, state: bool, perturb: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"type": draw(FIELD_TYPES)}
    if draw(st.booleans()):
        out["default"] = draw(YAMLISH)
    if state and draw(st.booleans()):
        out["reducer"] = draw(REDUCERS | BAD_REDUCERS if perturb else REDUCERS)
    if not state and draw(st.booleans()):
        out["required"] = draw(st.booleans())
    return out


def _node(
    draw: st.DrawFn, name: str, names: list[str], fields: list[str], chain: str, perturb: bool
) -> dict[str, Any]:
    """A node of a random kind whose default route is `chain` (so that every node is reachable)."""
    kind = draw(NODE_KINDS if perturb else NODE_KINDS.filter(lambda k: k != "subgraph"))
    node: dict[str, Any] = {} if kind == "action" and draw(st.booleans()) else {"type": kind}
    targets = st.sampled_from([*names, "$end"])
    if kind in ("action", "foreach"):
        node["action"] = {
            "tool": draw(st.sampled_from(["echo", "echo", "fail"])),
            "params": draw(
                st.dictionaries(st.sampled_from(["x", "y", "message"]), TEMPLATES | YAMLISH, max_size=3)
            ),
        }
        if draw(st.booleans()):
            node["retry"] = draw(RETRY | st.lists(RETRY, max_size=2))
    if kind == "foreach":
        node["over"] = draw(TEMPLATES | st.lists(YAMLISH, max_size=3))
        node["as"] = draw(st.sampled_from(["item", "w"]))
        node["parallel"] = draw(st.booleans())
        if fields and draw(st.booleans()):
            node["collect"] = draw(st.sampled_from(fields))
    if kind == "subgraph":
        node["graph"] = draw(st.sampled_from(["child", "t"]))
        node["inputs"] = draw(st.dictionaries(st.sampled_from(["a", "x"]), TEMPLATES, max_size=2))
    if kind != "pause" and fields and draw(st.booleans()):
        node["assign"] = draw(st.dictionaries(st.sampled_from(fields), TEMPLATES | YAMLISH, max_size=3))
    if kind == "return":
        if draw(st.booleans()):
            node["output"] = draw(
                TEMPLATES | st.dictionaries(st.sampled_from(["o", "p"]), TEMPLATES, max_size=2)
            )
        return node
    node["next"] = draw(_next(targets, chain) | BAD_NEXT if perturb else _next(targets, chain))
    if kind in ("action", "foreach", "subgraph") and draw(st.booleans()):
        node["on_error"] = draw(targets)
    return node


def _next(targets: st.SearchStrategy[str], default: str) -> st.SearchStrategy[Any]:
    branch = st.fixed_dictionaries({"to": targets, "when": CONDITIONS})
    return st.one_of(
        st.just(default),
        st.lists(branch, max_size=2).map(lambda bs: [*bs, {"to": default}]),
        st.just({"type": "unconditional", "to": default}),
        st.lists(branch, max_size=2).map(
            lambda bs: {"type": "conditional", "branches": bs, "default": default}
        ),
        st.just({"fn": "json:loads"}),
    )


def _perturb(draw: st.DrawFn, doc: dict[str, Any]) -> None:
    """Replace, add or delete one value in a container of `doc` chosen uniformly, so that
    every part of the schema (a reducer, a next mapping, a retry policy) gets wrong shapes."""
    container = draw(st.sampled_from(_containers(doc)))
    if isinstance(container, dict):
        key = draw(
            st.sampled_from([*container, *container, "x[y", "²", "type", "reducer", "branches", "bogus"])
        )
        if draw(st.integers(0, 4)) == 0:
            container.pop(key, None)
        else:
            container[key] = copy.deepcopy(draw(JUNK | JUNK | YAMLISH | TEMPLATES))
    elif isinstance(container, list) and container:
        container[draw(st.integers(0, len(container) - 1))] = copy.deepcopy(draw(JUNK | YAMLISH))


def _containers(doc: Any) -> list[Any]:
    """Every mapping and list in `doc`, in a fixed order."""
    found, stack = [], [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, dict | list):
            found.append(item)
            stack.extend(reversed(list(item.values()) if isinstance(item, dict) else item))
    return found


TWEAKS = st.sampled_from(
    ["9" * 4400, "-0x" + "f" * 4000, '"\\ud800"', '"\\udc00x"', "x[y", "²", "1.5", "[1.5]"]
)


@st.composite
def tweaked(draw: st.DrawFn, text: str) -> str:
    """`text` with one scalar token swapped for a hostile one (what YAML's dumper cannot write)."""
    tokens = [m for m in re.finditer(r"(?<=: )[\w.$\-]+", text)]
    if not tokens:
        return text
    token = draw(st.sampled_from(tokens))
    return text[: token.start()] + draw(TWEAKS) + text[token.end() :]


GRAPHS = graphs()
RUNNABLE = graphs(perturb=False)


# -- settings ------------------------------------------------------------------------------

HUNT = int(os.environ.get("GRAPHRUNNER_FUZZ", "0") or 0)


def fuzz(examples: int) -> settings:
    """Reproducible, bounded settings for CI; `GRAPHRUNNER_FUZZ=N` hunts with N times the
    examples and fresh randomness instead (nothing is stored either way)."""
    return settings(
        max_examples=examples * HUNT if HUNT else examples,
        deadline=None,
        derandomize=not HUNT,
        database=None,
        suppress_health_check=list(HealthCheck),
        print_blob=bool(HUNT),
    )
