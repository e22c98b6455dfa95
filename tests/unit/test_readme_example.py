"""The README shows graphs/hello.yaml as it is: the copy fails this test when the two drift."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def readme_blocks_of(graph_id: str) -> list[str]:
    """The README's ```yaml blocks that write the graph `graph_id`."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    return [
        b for b in YAML_BLOCK.findall(readme) if re.search(rf"^id: {re.escape(graph_id)}$", b, re.MULTILINE)
    ]


def test_the_readme_hello_example_is_graphs_hello_yaml() -> None:
    hello = (REPO / "graphs" / "hello.yaml").read_text(encoding="utf-8")
    blocks = readme_blocks_of(yaml.safe_load(hello)["id"])
    assert len(blocks) == 1, "the README shows the hello graph once"
    assert blocks[0] == hello, "README.md's hello example differs from graphs/hello.yaml: copy the file"
