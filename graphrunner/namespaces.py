"""Which expression namespaces exist where (DESIGN §2.3), and the context that fills them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

BASE = frozenset({"state", "inputs", "run", "_now", "_timestamp"})
WITH_RESULT = BASE | {"result"}
HOOK = BASE | {"event"}
# a Rye graph's hooks see the event's data at the top level, as the walker's hook contexts have it
RYE_HOOK_DATA = frozenset(
    {"graph_id", "node", "next_node", "step_count", "result", "steps", "status", "error", "classification"}
    | {"limit_code", "current_value", "current_max"}
)
RYE_HOOK = HOOK | RYE_HOOK_DATA


def for_params(item_name: str | None = None) -> frozenset[str]:
    """Namespaces of action params: no `result`; a foreach adds its item name and `index`."""
    return BASE | {item_name, "index"} if item_name else BASE


def clock_values(now: datetime) -> dict[str, Any]:
    """`_now` (ISO 8601 UTC) and `_timestamp` (epoch milliseconds) for one instant."""
    now = now.astimezone(UTC)
    return {
        "_now": now.isoformat().replace("+00:00", "Z"),
        "_timestamp": int(now.timestamp() * 1000),
    }


def context(
    *,
    state: dict[str, Any],
    inputs: dict[str, Any],
    run: dict[str, Any],
    now: datetime,
    **extra: Any,
) -> dict[str, Any]:
    """The evaluation context of one expression site."""
    return {"state": state, "inputs": inputs, "run": run, **clock_values(now), **extra}
