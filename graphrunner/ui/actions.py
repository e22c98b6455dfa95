"""The actions of the JSON API: cancel and resume a run (submitting is `POST /api/runs`).

Any login may cancel a run (stopping never widens what a run does); resuming one needs a login
granted every capability the run carries (`permits.check_resume`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from graphrunner.errors import InvalidRunQuery
from graphrunner.ui.base import Base
from graphrunner.ui.permits import check_resume
from graphrunner.ui.reading import snapshot

if TYPE_CHECKING:
    from graphrunner.client import Client


def cancel(client: Client, run_id: str) -> dict[str, Any]:
    """Cancel the run; its status after."""
    handle = client.cancel(run_id)
    return {"run_id": handle.id, "status": handle.status()}


def resume(
    client: Client, run_id: str, body: dict[str, Any], granted: Sequence[str], user: str | None
) -> dict[str, Any]:
    """Resume the run with the body's `state_patch`, if the login is granted every capability the
    run carries (`SubmitRefused` otherwise); its status after."""
    patch = body.get("state_patch")
    if patch is not None and not isinstance(patch, dict):
        raise InvalidRunQuery('"state_patch" must be a JSON object')
    check_resume(granted, run_id, snapshot(client, run_id).capabilities, user)
    handle = client.resume(run_id, patch or None)
    return {"run_id": handle.id, "status": handle.status()}


class Cancel(Base):
    """`POST /api/runs/<id>/cancel`."""

    async def post(self, run_id: str) -> None:
        self.send_json(await self.call(cancel, self.explorer.client, run_id))


class Resume(Base):
    """`POST /api/runs/<id>/resume` with `{"state_patch": {...}}` (optional)."""

    async def post(self, run_id: str) -> None:
        body = self.json_body()
        answer = await self.call(resume, self.explorer.client, run_id, body, self.login.granted, self.user)
        self.send_json(answer)
