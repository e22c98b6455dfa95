"""Register the schedules the graphs on GRAPHRUNNER_GRAPH_PATH declare (`config.schedules`).

Workers and `graphrunner beat` do it when their housekeeping starts; registering is idempotent
(the same spec again changes nothing a beat relies on), so every process may do it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from graphrunner.errors import GraphrunnerError
from graphrunner.loading.locate import graph_files

if TYPE_CHECKING:
    from graphrunner.cluster.schedules.admin import Schedules

log = logging.getLogger("graphrunner.schedules")


def register_declared(schedules: Schedules[Any]) -> list[str]:
    """Register the schedules of every graph file on the graph path; the ids registered."""
    registered: list[str] = []
    for path in graph_files(schedules.settings.graph_path):
        try:
            if "schedules:" not in path.read_text(encoding="utf-8", errors="replace"):
                continue  # cheap: most graphs declare none, and are not loaded here
            registered += [info.id for info in schedules.register(path)]
        except (GraphrunnerError, OSError) as exc:
            log.warning("schedules of graph file %s not registered: %s", path, exc)
    return registered
