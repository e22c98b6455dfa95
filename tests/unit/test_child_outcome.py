"""How a parent reads its finished child run (a subgraph's, a branch's, a foreach item's)."""

from __future__ import annotations

from graphrunner.cluster.runs.children import outcome_of
from graphrunner.engine import RunSnapshot, RunStatus

PARENT = RunSnapshot(run_id="p", graph_id="parent", capabilities=("tool:*", "graph:*"))


def child(**fields: object) -> RunSnapshot:
    return RunSnapshot.model_validate(
        {"run_id": "p.1.a", "graph_id": "kid", "capabilities": PARENT.capabilities, **fields}
    )


def test_a_running_child_has_no_outcome_yet() -> None:
    assert outcome_of(PARENT, child()) is None


def test_a_finished_child_gives_its_status_state_output_and_error() -> None:
    done = outcome_of(PARENT, child(status=RunStatus.COMPLETED, state={"n": 1}, output={"n": 1}))
    assert done is not None and (done.status, done.state, done.output) == ("completed", {"n": 1}, {"n": 1})
    error = {"type": "node_exception", "message": "boom"}
    failed = outcome_of(PARENT, child(status=RunStatus.FAILED, error=error))
    assert failed is not None and failed.error is not None
    assert (failed.status, failed.error.to_dict()) == ("failed", error)


def test_a_child_with_wider_capabilities_is_never_trusted() -> None:
    """A run that took the child's id with wider capabilities: its results are not merged."""
    impostor = child(status=RunStatus.COMPLETED, state={"secret": 1}, capabilities=("*",))
    outcome = outcome_of(PARENT, impostor)
    assert outcome is not None and outcome.status == "failed" and outcome.state == {}
    assert outcome.error is not None and outcome.error.type == "permission_denied"
    assert outcome.error.message == "child run p.1.a has capabilities ['*'], more than its parent's"


def test_a_child_narrowed_by_its_node_is_trusted() -> None:
    """A subgraph node's `capabilities` (a Rye graph-tool call's) give the child fewer."""
    narrowed = child(status=RunStatus.COMPLETED, state={"n": 1}, capabilities=("tool:echo", "graph:kid*"))
    outcome = outcome_of(PARENT, narrowed)
    assert outcome is not None and outcome.status == "completed" and outcome.state == {"n": 1}
