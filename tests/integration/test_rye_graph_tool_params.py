"""A Rye graph-tool call's `capabilities` and `depth` on the cluster: the child runs are kept with
the narrowed capabilities and the depth bound, and a child asking for more is refused
(tests/rye/113-115 run the same files in-process and on the cluster through test_rye_fixtures.py)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from rye_fixtures import RYE_DIR, unique

from graphrunner.client import Client
from graphrunner.loading import load_graph

pytestmark = pytest.mark.integration


def copied(tmp_path: Path, *names: str) -> Path:
    """The fixtures `names` copied with graph ids of their own; the path of the first."""
    suffix = f"-p{uuid.uuid4().hex[:6]}"
    for name in names:
        text = unique((RYE_DIR / f"{name}.yaml").read_text(encoding="utf-8"), suffix)
        (tmp_path / f"{name}{suffix}.yaml").write_text(text, encoding="utf-8")
    return tmp_path / f"{names[0]}{suffix}.yaml"


def test_child_runs_keep_the_capabilities_and_depth_their_call_gave(cluster: Client, tmp_path: Path) -> None:
    graph = load_graph(copied(tmp_path, "113-child-graph-capabilities", "122-child-echo"))
    handle = cluster.submit(graph, capabilities=["*"])
    result = handle.wait(timeout=60)
    assert (result.status, result.error and result.error.type) == ("failed", "permission_denied")
    kids = [cluster.run(kid).snapshot() for kid in handle.snapshot().children]
    assert [k.capabilities for k in kids] == [("rye.execute.tool.echo",), ("rye.execute.tool.rye.bash.*",)]
    assert [k.status.value for k in kids] == ["completed", "failed"]

    nested = load_graph(copied(tmp_path, "115-child-graph-depth", "123-child-nests", "122-child-echo"))
    handle = cluster.submit(nested, capabilities=["*"])
    assert handle.wait(timeout=60).error.type == "limit_exceeded"  # type: ignore[union-attr]
    first, second = (cluster.run(kid).snapshot() for kid in handle.snapshot().children)
    assert (first.depth, first.max_depth, second.max_depth) == (1, 2, 1)
    (grandchild,) = first.children
    assert cluster.run(grandchild).snapshot().max_depth == 2  # inherited: it may start no child
