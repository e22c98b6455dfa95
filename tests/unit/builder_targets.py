"""State models, node functions and routing functions of the builder graphs in test_builder.py.

Module level, so that graphs import them by name, as workers do.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from graphrunner.builder import END, append, bounded_append, merge


class Flow(BaseModel):
    """The state of the linear and conditional graphs."""

    topic: str = ""
    count: int = 0
    log: Annotated[list[str], append] = Field(default_factory=lambda: ["seed"])
    meta: Annotated[dict[str, Any], merge] = Field(default_factory=dict)
    recent: Annotated[list[int], bounded_append(2)] = []


async def first(state: Flow) -> dict[str, Any]:
    """Sees a `Flow` instance."""
    return {"log": [f"first:{state.topic}"], "count": state.count + 1, "meta": {"first": True}}


async def second(state: Flow) -> dict[str, Any]:
    """Writes a field through `bounded_append`."""
    return {"log": ["second"], "recent": [state.count], "meta": {"second": True}}


def plain(state: dict[str, Any]) -> dict[str, Any]:
    """Unannotated (a dict), and synchronous: both are allowed."""
    return {"log": [f"plain:{type(state).__name__}"]}


def until_three(state: Flow) -> str:
    """Loop back to `first` until the count reaches three."""
    return "first" if state.count < 3 else END


def after_first(state: Flow) -> str:
    """OpenArmature fixture 2: routing sees the post-update state."""
    return END if state.count == 1 else "second"


def to_ghost(state: dict[str, Any]) -> str:
    """OpenArmature fixture 8: a name that is neither a node nor END."""
    return "ghost"


async def route_async(state: Flow) -> str:
    """Refused: routing functions are called synchronously."""
    return END


class Logged(BaseModel):
    """A log and a value, for the error graphs."""

    v: str = ""
    log: Annotated[list[str], append] = []


async def log_a(state: Logged) -> dict[str, Any]:
    """Writes `a`."""
    return {"v": "a", "log": ["a"]}


async def boom(state: Logged) -> dict[str, Any]:
    """OpenArmature fixture 9: raises."""
    raise RuntimeError("boom")


async def log_c(state: Logged) -> dict[str, Any]:
    """Never runs after `boom`."""
    return {"log": ["c"]}


async def not_a_list(state: Logged) -> dict[str, Any]:
    """An `append` of a string: a ReducerError."""
    return {"log": "oops"}


async def not_a_mapping(state: Logged) -> Any:
    """A node must return a partial update."""
    return ["log"]


class Needs(BaseModel):
    """A field without a default: the initial state must give it."""

    name: str
    log: Annotated[list[str], append] = []


async def greet(state: Needs) -> dict[str, Any]:
    """Needs `name`."""
    return {"log": [f"hello {state.name}"]}


async def two_args(state: Flow, other: int) -> dict[str, Any]:
    """Refused: a node takes the state only."""
    return {}


class Holder:
    """Has a method, which is not importable by name when bound."""

    def node(self, state: Flow) -> dict[str, Any]:
        """A bound method."""
        return {}


class Parent(BaseModel):
    """OpenArmature fixture 6: the parent of a subgraph."""

    message: str = ""
    trace: Annotated[list[str], append] = Field(default_factory=lambda: ["outer-start"])
    query: str = ""
    answer: str = ""


class Child(BaseModel):
    """The child of fixture 6, with a query and an answer for the explicit maps."""

    message: str = ""
    trace: Annotated[list[str], append] = []
    question: str = "unset"
    reply: str = ""
    scratch: str = ""


async def outer_a(state: Parent) -> dict[str, Any]:
    """Parent, before the subgraph."""
    return {"trace": ["outer_a"]}


async def outer_b(state: Parent) -> dict[str, Any]:
    """Parent, after the subgraph."""
    return {"trace": ["outer_b"]}


async def child_x(state: Child) -> dict[str, Any]:
    """Child, first node."""
    return {"message": "from-x", "trace": ["x"], "scratch": "x"}


async def child_y(state: Child) -> dict[str, Any]:
    """Child, second node: answers the question it was given."""
    return {"message": "from-y", "trace": ["y"], "reply": f"re: {state.question}"}


def describe(state: Flow, note: str) -> dict[str, Any]:
    """A `python` tool call from YAML: `state` arrives as a `Flow`, `note` as it is."""
    return {"log": [f"{type(state).__name__}:{state.topic}:{note}"]}


def by_topic(state: Flow) -> str:
    """A YAML routing function annotated with the model."""
    return "done" if state.topic else END


class Docs(BaseModel):
    """The state of the foreach, pause, return and hook graphs (builder parity)."""

    docs: list[str] = []
    lengths: list[int] = []
    note: str = ""
    seen: Annotated[list[str], append] = []


def measure(item: str, index: int) -> int:
    """One item of a foreach: its length, checked against its position."""
    if item == "boom":
        raise ValueError(f"item {index} is boom")
    return len(item) * 10 + index


async def noted(state: Docs) -> dict[str, Any]:
    """After the pause: what the resume patched in is kept."""
    return {"seen": [f"noted:{state.note}"]}


def watch(event: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """An after_step hook: records nothing, answers nothing (hooks observe)."""
    return {"event": event["name"], "node": event.get("node"), "lengths": state.get("lengths")}


def forgive(event: dict[str, Any]) -> str:
    """An error hook that answers `continue` for the foreach node."""
    return "continue" if event.get("node") == "measure" else "fail"


class Source(BaseModel):
    """A branch's state: the query in, hits and a log out."""

    query: str = ""
    hits: list[str] = []
    log: Annotated[list[str], append] = []


async def search_wiki(state: Source) -> dict[str, Any]:
    return {"hits": [f"wiki:{state.query}"], "log": ["wiki"]}


async def search_web(state: Source) -> dict[str, Any]:
    return {"hits": [f"web:{state.query}"], "log": ["web"]}


class Research(BaseModel):
    """The parent of the parallel builder graph."""

    query: str = ""
    wiki_hits: list[str] = []
    web_hits: list[str] = []
    log: Annotated[list[str], append] = []
    docs: list[str] = []
    shouted: list[Any] = []


class Shout(BaseModel):
    """A foreach child's state."""

    doc: str = ""
    loud: str = ""


async def shout(state: Shout) -> dict[str, Any]:
    return {"loud": state.doc.upper()}
