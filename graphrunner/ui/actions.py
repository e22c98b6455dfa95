"""The actions of the JSON API: cancel, resume and fork a run (submitting is `POST /api/runs`).

Any login may cancel a run (stopping never widens what a run does); resuming or forking one
(with a state patch) needs a login granted every capability the run carries
(`permits.check_resume`): the fork carries them too."""

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


def fork(
    client: Client, run_id: str, body: dict[str, Any], granted: Sequence[str], user: str | None
) -> dict[str, Any]:
    """Fork the run after the body's `step`, with its `state_patch`, if the login is granted every
    capability the run carries (`SubmitRefused` otherwise); the new run's id and status."""
    step, patch = body.get("step"), body.get("state_patch")
    if not isinstance(step, int) or isinstance(step, bool):
        raise InvalidRunQuery('"step" must be a whole number: the step to fork after')
    if patch is not None and not isinstance(patch, dict):
        raise InvalidRunQuery('"state_patch" must be a JSON object')
    check_resume(granted, run_id, snapshot(client, run_id).capabilities, user, "fork")
    handle = client.fork(run_id, step, patch or None)
    return {"run_id": handle.id, "status": handle.status(), "forked_from": {"run_id": run_id, "step": step}}


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


class Fork(Base):
    """`POST /api/runs/<id>/fork` with `{"step": N, "state_patch": {...}}` (the patch optional):
    201 with the new run's id."""

    async def post(self, run_id: str) -> None:
        body = self.json_body()
        answer = await self.call(fork, self.explorer.client, run_id, body, self.login.granted, self.user)
        self.send_json(answer, 201)
