"""Tool results as the walker sees them: the `{status, data}` envelope lifted, errors found.

The walker's `_unwrap_result` lifts `data` out of Rye's execute envelope so `${result.stdout}`
works, drops the envelope's bookkeeping keys, wraps a result that is not a mapping as
`{result: value}`, and treats `status: error` (outer) or `success: false` (inner) as an action
error. A Rye graph's dispatches go through `unwrap`; a graphrunner graph's never do.
"""

from __future__ import annotations

from typing import Any

DROPPED = ("chain", "metadata", "path", "source", "resolved_env_keys")
ERROR_KEYS = ("error", "message", "stderr")


def unwrap(raw: Any) -> dict[str, Any]:
    """The walker's view of a tool's `raw` result; `status: "error"` marks a failed action."""
    if not isinstance(raw, dict):
        return {"result": raw}
    enveloped = isinstance(raw.get("status"), str) and "data" in raw
    if enveloped:
        data = raw["data"]
        out = dict(data) if isinstance(data, dict) else {"result": data}
    else:
        out = {k: v for k, v in raw.items() if k not in DROPPED}
    if raw.get("status") == "error" or out.get("success") is False:
        out["status"] = "error"
        if enveloped and "error" not in out and raw.get("error") is not None:
            out["error"] = raw["error"]
    return out


def reported_error(result: dict[str, Any]) -> str | None:
    """What an unwrapped result says went wrong, or None when it did not fail."""
    if result.get("status") != "error":
        return None
    for key in ERROR_KEYS:
        text = result.get(key)
        if isinstance(text, str) and text.strip():
            return text.strip()
    code = result.get("exit_code")
    return f"exit code {code}" if code is not None else "the tool reported an error"
