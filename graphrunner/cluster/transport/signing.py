"""The cluster's key: a foreach item message carries its call under a signature workers verify.

A step message names only `(run_id, step, phase)`: the worker derives the call from the
run's pinned graph and committed state. An item message carries the call itself (deriving
it again for each of 10,000 items would read the run's state 10,000 times), so the worker
that derived it signs the whole message (run, step, tag, index, call, attempt, timer) with
HMAC-SHA256 under the cluster's key, and the worker that runs it verifies the signature
before anything else. A message someone wrote by hand (a Flower login's send-task, anything
that can put an envelope on the queue) does not verify and is refused; a copied one can at
most run again the call its run was allowed to make, at the place it was made for.

The key is GRAPHRUNNER_SIGNING_KEY when set (on every worker alike), else a random key kept
in the store, made by the first worker that needs it: whoever can read the store is full
trust already (docs/security.md).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from graphrunner.cluster.transport.messages import ItemMessage
from graphrunner.settings import Settings
from graphrunner.store import Store


class Signer:
    """Signs and verifies item messages under one key."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    @classmethod
    def of(cls, settings: Settings, store: Store) -> Signer:
        """The signer of the cluster: GRAPHRUNNER_SIGNING_KEY, else the store's key."""
        key = settings.signing_key.encode() if settings.signing_key else store.signing_key()
        return cls(key)

    def sign(self, payload: dict[str, Any]) -> dict[str, Any]:
        """`payload` (an item message's fields, signed or not) with the signature of the rest."""
        unsigned = {**UNSIGNED_DEFAULTS, **payload}
        unsigned.pop("sig", None)
        return {**unsigned, "sig": self._digest(unsigned)}

    def verify(self, msg: ItemMessage) -> bool:
        """Whether `msg` carries the signature of its own content under this key."""
        return hmac.compare_digest(msg.sig.encode(), self._digest(msg.model_dump(exclude={"sig"})).encode())

    def _digest(self, fields: dict[str, Any]) -> str:
        body = json.dumps(fields, sort_keys=True, separators=(",", ":"))
        return hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()


# the message's fields that a payload may leave out, as the parsed message has them
UNSIGNED_DEFAULTS: dict[str, Any] = {
    name: field.default for name, field in ItemMessage.model_fields.items() if not field.is_required()
}
