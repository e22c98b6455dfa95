"""Validation findings: one `Issue` per problem, gathered in a `ValidationReport`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Issue:
    """One finding of validation: an error or a warning, with where it was found."""

    code: str
    message: str
    node: str | None = None
    location: str | None = None
    file: str | None = None
    line: int | None = None

    def where(self) -> str:
        """`file:line` (or what is known of it), for messages."""
        if self.file and self.line:
            return f"{self.file}:{self.line}"
        return self.file or ""

    def render(self) -> str:
        """One human-readable line: `file:line: [code] message`."""
        prefix = f"{self.where()}: " if self.where() else ""
        return f"{prefix}[{self.code}] {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of `validate --json`."""
        return {
            "code": self.code,
            "message": self.message,
            "node": self.node,
            "location": self.location,
            "file": self.file,
            "line": self.line,
        }


@dataclass
class ValidationReport:
    """Errors and warnings of one graph; valid when there is no error."""

    errors: list[Issue] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)
    node_count: int = 0
    graph_id: str | None = None
    file: str | None = None

    @property
    def valid(self) -> bool:
        """True when no error was found (warnings do not count)."""
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of `validate --json`."""
        return {
            "valid": self.valid,
            "graph_id": self.graph_id,
            "file": self.file,
            "errors": [i.to_dict() for i in self.errors],
            "warnings": [i.to_dict() for i in self.warnings],
            "node_count": self.node_count,
        }
