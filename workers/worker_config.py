"""The worker configuration: the one place a team configures what its workers run.

`graphrunner worker` imports this file when GRAPHRUNNER_WORKER_CONFIG names it (the worker
image sets GRAPHRUNNER_WORKER_CONFIG=/app/workers/worker_config.py). Nothing else is needed:
no PYTHONPATH, no `-A`. Edit it to:

- register the team's tools: `register_tool(...)` below, or publish them from a package under
  the `graphrunner.tools` entry point (workers/example_tools is one; the image installs it);
- map Rye tool ids (what Rye graph files name in `item_id`) to the team's tools:
  `register_rye_alias("rye/team/audit", "team.audit")` below; producers validate with what
  GRAPHRUNNER_RYE_TOOLS and tool plugins' `rye_ids` declare (docs/running-rye-graphs.md);
- add deployment hooks: the `hooks` list, written like a graph's `hooks:`. They run on every
  run after the graph's own hooks and only observe (notifications, audit, telemetry);
- run start-up code a worker needs (read a secret, warm a client): plain module-level code.

Default capabilities are stamped on a run when it is submitted, so they are a setting both
producers and workers read: GRAPHRUNNER_DEFAULT_CAPABILITIES in `.env` (compose) or the
ConfigMap (Kubernetes), not this file.

A mistake here (an import that fails, a hook naming an unknown tool) stops the worker at
start-up with a message naming this file and the problem; it never reaches a run.
"""

from __future__ import annotations

import logging
from typing import Any

from graphrunner import ToolContext, register_rye_alias, register_tool

audit = logging.getLogger("graphrunner.audit")


class AuditTool:
    """`team.audit`: logs one line about the run (a stand-in for the team's own notifier)."""

    name = "team.audit"
    version = "1"

    async def run(self, params: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        """Log `params` with the run and graph they belong to; returns what was logged."""
        line = {"run_id": context.run_id, "graph_id": context.graph_id, **params}
        audit.info("run finished: %s", line)
        return line


register_tool(AuditTool())
register_rye_alias("rye/team/audit", "team.audit")  # a Rye graph's `item_id: rye/team/audit`

hooks: list[dict[str, Any]] = [
    {
        "event": "graph_completed",
        "action": {"tool": "team.audit", "params": {"status": "${event.status}", "steps": "${event.steps}"}},
    },
]
