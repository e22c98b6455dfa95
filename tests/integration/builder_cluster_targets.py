"""Builder graphs for test_builder_cluster.py: module level, so workers import their functions."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from graphrunner import END, Graph, GraphBuilder
from graphrunner.builder import append, merge


class Draft(BaseModel):
    """The parent graph's state."""

    topic: str
    attempts: int = 0
    text: str = ""
    notes: Annotated[list[str], append] = Field(default_factory=list)
    meta: Annotated[dict[str, Any], merge] = Field(default_factory=dict)


class Polish(BaseModel):
    """The child graph's state."""

    text: str = ""
    notes: Annotated[list[str], append] = Field(default_factory=list)


async def write(state: Draft) -> dict[str, Any]:
    """A draft per attempt."""
    attempt = state.attempts + 1
    return {"attempts": attempt, "text": f"{state.topic} v{attempt}", "notes": [f"wrote v{attempt}"]}


def review(state: Draft) -> str:
    """Write again until the second attempt, then polish."""
    return "write" if state.attempts < 2 else "polish"


async def shine(state: Polish) -> dict[str, Any]:
    """The child's only node."""
    return {"text": state.text.upper() + "!", "notes": ["polished"]}


async def publish(state: Draft) -> dict[str, Any]:
    """Records what was published."""
    return {"meta": {"published": state.text, "notes": len(state.notes)}}


async def explode(state: Draft) -> dict[str, Any]:
    """Fails after the first write."""
    raise RuntimeError(f"cannot publish {state.text!r}")


def polish_graph() -> Graph:
    """The child: one node."""
    return GraphBuilder(Polish, id="builder-it/polish").add_node("shine", shine).set_entry("shine").compile()


def draft_graph() -> Graph:
    """Write twice (a conditional loop), polish in a subgraph, publish."""
    builder = GraphBuilder(Draft, id="builder-it/draft").add_node("write", write).add_node("publish", publish)
    builder.add_subgraph("polish", polish_graph(), projects_in=["text"], projects_out=["text", "notes"])
    builder.add_conditional_edge("write", review).add_edge("polish", "publish").add_edge("publish", END)
    return builder.set_entry("write").compile()


def failing_graph() -> Graph:
    """Write once, then a node raises."""
    builder = (
        GraphBuilder(Draft, id="builder-it/failing").add_node("write", write).add_node("explode", explode)
    )
    return builder.add_edge("write", "explode").set_entry("write").compile()


class Batch(BaseModel):
    """The state of the parity graph: a foreach, a pause, hooks and a return with output."""

    docs: list[str] = []
    lengths: list[int] = []
    approved_by: str = ""
    log: Annotated[list[str], append] = []


def length(item: str, index: int) -> int:
    """One foreach item."""
    return len(item) * 10 + index


async def approve(state: Batch) -> dict[str, Any]:
    """After the pause: the resume's state patch is there."""
    return {"log": [f"approved by {state.approved_by}"]}


def count_steps(event: dict[str, Any]) -> dict[str, Any]:
    """An after_step hook that only observes."""
    return {"seen": event["node"]}


def parity_graph() -> Graph:
    """Foreach (parallel) -> pause -> node -> return with output, with an after_step hook."""
    return (
        GraphBuilder(Batch, id="builder-it/parity")
        .add_foreach("measure", length, over="docs", collect="lengths", parallel=True, max_concurrency=2)
        .add_pause("wait_for_approval", message="approve the lengths")
        .add_node("approve", approve)
        .add_return("done", output={"lengths": "lengths", "log": "log"})
        .add_edge("measure", "wait_for_approval")
        .add_edge("wait_for_approval", "approve")
        .add_edge("approve", "done")
        .add_hook("after_step", count_steps)
        .set_entry("measure")
        .compile()
    )
