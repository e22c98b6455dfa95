"""`example.slugify`: turn a text into a lowercase ASCII, dash-separated URL slug."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from graphrunner.tools import ToolContext, parse_params

_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


class SlugifyParams(BaseModel):
    """Params of `example.slugify`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    max_length: int = Field(default=64, ge=1)


def slugify(text: str, max_length: int = 64) -> str:
    """The slug of `text`: ASCII letters and digits, joined by single dashes, at most `max_length` long."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = _NOT_ALNUM.sub("-", ascii_text.lower()).strip("-")
    return slug[:max_length].rstrip("-")


class SlugifyTool:
    """`example.slugify`: `{text, max_length=64}` -> `{"slug": ...}` (empty when `text` has no letters)."""

    name = "example.slugify"
    version = "1"

    async def run(self, params: dict[str, Any], context: ToolContext) -> dict[str, str]:
        """Return `{"slug": slugify(text, max_length)}`."""
        p = parse_params(SlugifyParams, params, self.name)
        return {"slug": slugify(p.text, p.max_length)}
