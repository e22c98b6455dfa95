"""`example.word_count`: count the words and lines of a text."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from graphrunner.tools import ToolContext, parse_params


class WordCountParams(BaseModel):
    """Params of `example.word_count`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str


def count_words(text: str) -> dict[str, int]:
    """`{"words": n, "lines": n}`: words split on whitespace; a final newline ends a line, not starts one."""
    return {"words": len(text.split()), "lines": len(text.splitlines())}


class WordCountTool:
    """`example.word_count`: `{text}` -> `{"words": n, "lines": n}`."""

    name = "example.word_count"
    version = "1"

    async def run(self, params: dict[str, Any], context: ToolContext) -> dict[str, int]:
        """Return the word and line counts of `text`."""
        p = parse_params(WordCountParams, params, self.name)
        return count_words(p.text)
