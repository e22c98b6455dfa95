"""The base of every graph-model class: frozen, and unknown keys are errors."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

NODE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
END = "$end"


class Model(BaseModel):
    """Frozen, strict about unknown keys, and populated by field name or alias."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
