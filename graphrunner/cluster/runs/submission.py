"""Starting a run: its first snapshot, its concurrency key taken, its record and first message
written at once. What `Client.submit` does once the graph is loaded, and what the scheduler does
for a tick, without a client."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from graphrunner import engine
from graphrunner.cluster.runs import operations
from graphrunner.cluster.runs.ids import check_concurrency_key, check_run_id, fingerprint
from graphrunner.engine.schedule_link import ScheduleLink
from graphrunner.errors import GraphrunnerError, RunConflict
from graphrunner.telemetry import propagation

if TYPE_CHECKING:
    from graphrunner.cluster.runs.context import Cluster
    from graphrunner.graph import Graph

WHEN_BUSY = ("queue", "refuse")


def submit(
    cluster: Cluster,
    graph: Graph,
    inputs: Mapping[str, Any] | None = None,
    *,
    state: Mapping[str, Any] | None = None,
    run_id: str | None = None,
    capabilities: Sequence[str] | None = None,
    concurrency_key: str | None = None,
    when_busy: str = "queue",
    traceparent: str | None = None,
    schedule: ScheduleLink | None = None,
) -> str:
    """Start a run of `graph`; its id. `Client.submit` says what each argument does; the same run
    id submitted again with the same graph version, inputs, state, capabilities and key is the
    same run (its id is returned), with anything else a `RunConflict`."""
    if when_busy not in WHEN_BUSY:
        raise GraphrunnerError(f"when_busy must be 'queue' or 'refuse', got {when_busy!r}")
    key = check_concurrency_key(concurrency_key)
    if traceparent is not None and not propagation.valid_traceparent(traceparent):
        raise GraphrunnerError(
            f"traceparent {traceparent!r:.80} is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)"
        )
    run_id = check_run_id(run_id) if run_id is not None else uuid.uuid4().hex
    settings, store = cluster.settings, cluster.store
    caps = settings.default_capabilities if capabilities is None else capabilities
    snap = engine.begin(
        graph, inputs, run_id=run_id, state=state, capabilities=caps, max_state_bytes=settings.max_state_bytes
    )
    trace = propagation.at_submit(run_id, traceparent)
    snap = snap.model_copy(update={"concurrency_key": key, "trace": trace, "schedule": schedule})
    cluster.graphs.put(graph)
    identity = fingerprint(graph, snap.inputs, snap.capabilities, key, state=state)
    admitting = key is not None and not store.run_fields(run_id)  # a resubmit takes no key
    if admitting:
        snap = operations.admit(store, snap, queue=when_busy == "queue")
    created = cluster.create_run(snap, graph, identity)
    if created.created or created.existing_fingerprint == identity:
        return run_id  # new, or submitted before: the same run
    if admitting and key is not None:  # we took (or queued for) the key: give it back
        store.unqueue(key, run_id)
        operations.hand_on(cluster, snap)
    raise RunConflict(
        f"run {run_id} already exists with another graph version, inputs, initial state, "
        "capabilities or concurrency key"
    )
