"""The one error tree: every error graphrunner raises to users derives from `GraphrunnerError`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graphrunner.report import Issue


class GraphrunnerError(Exception):
    """Root of every error graphrunner raises."""


class ConfigurationError(GraphrunnerError):
    """A setting is missing or invalid."""


class EmbeddedRedisError(ConfigurationError):
    """The embedded Redis server could not be found or started."""


class StoreUnavailable(GraphrunnerError):
    """Redis could not be reached within the retry budget."""


class BrokerUnavailable(GraphrunnerError):
    """The broker refused a message or could not be reached (what was not sent stays in the outbox)."""


class BadMessage(GraphrunnerError):
    """A message on the queue that is not a valid graphrunner task message."""


class InvalidRunId(GraphrunnerError):
    """A run id (or concurrency key) that does not follow the rule for it."""


class InvalidRunQuery(GraphrunnerError):
    """A run listing asked for with an unknown status, a bad limit, offset, time or cursor."""


class RunNotFound(GraphrunnerError):
    """No run with that id exists."""


class RunConflict(GraphrunnerError):
    """A run with that id exists with another graph, inputs, capabilities or concurrency key."""


class RunRefused(GraphrunnerError):
    """The run's concurrency key is held by another active run, and the caller chose refusal."""


class CancelError(GraphrunnerError):
    """A run cannot be cancelled: it has already finished."""


class ResumeError(GraphrunnerError):
    """A run cannot be resumed in its current status."""


class HistoryUnavailable(GraphrunnerError):
    """A run's state at a step is not kept: no such step, before the run's history starts (a
    fork's), past its history budget, or not kept at all."""


class ForkError(GraphrunnerError):
    """A run cannot be forked from that step (it ended the run, or its node is gone)."""


class WaitTimeout(GraphrunnerError):
    """A run did not settle within the time given to `wait`."""


class UnknownNode(GraphrunnerError):
    """The graph has no node of that name."""


class InvalidCapabilities(GraphrunnerError):
    """Capabilities that are not a list of non-empty pattern strings."""


class GraphNotFound(GraphrunnerError):
    """A graph file or graph id could not be found."""


class GraphValidationError(GraphrunnerError):
    """A graph is invalid; `issues` lists every problem as `{code, message, node}`."""

    def __init__(self, issues: Sequence[Issue], source: str | None = None) -> None:
        self.issues = list(issues)
        self.source = source
        head = f"invalid graph {source}" if source else "invalid graph"
        lines = [i.render() for i in self.issues] or ["(no details)"]
        super().__init__(head + ":\n  " + "\n  ".join(lines))

    @property
    def codes(self) -> list[str]:
        """The issue codes, in order."""
        return [i.code for i in self.issues]


class ExpressionError(GraphrunnerError):
    """An expression failed to compile or to evaluate."""

    def __init__(self, message: str, expression: str | None = None) -> None:
        self.expression = expression
        super().__init__(message)


class ToolError(GraphrunnerError):
    """Raised by a tool: an action failed. `transient` errors are retried by default.

    `traceback`: where the failure happened (e.g. in a Python tool's function), for the
    transcript; None when the message says it all.
    """

    def __init__(
        self,
        message: str,
        *,
        error_type: str | None = None,
        classification: str | None = None,
        transient: bool = False,
        traceback: str | None = None,
    ) -> None:
        self.error_type = error_type or type(self).__name__
        self.classification = classification or ("transient" if transient else "permanent")
        self.traceback = traceback
        super().__init__(message)


class UnknownTool(GraphrunnerError):
    """No tool of that name is registered."""


class RunError(GraphrunnerError):
    """A run ended on an error. `category` is the runtime error category of DESIGN §2.5."""

    category = "node_exception"

    def __init__(
        self,
        message: str,
        *,
        node: str | None = None,
        step: int | None = None,
        state: dict[str, Any] | None = None,
        category: str | None = None,
    ) -> None:
        self.node = node
        self.step = step
        self.state = state
        if category:
            self.category = category
        super().__init__(message)


class NodeError(RunError):
    """A node's action (or its edge) failed; `state` is the state at failure."""


class BranchFailed(NodeError):
    """A child run of a parallel node (its `branch`) or of a foreach over a graph (its item
    `index`) failed, and so did the node."""

    category = "branch_failed"

    def __init__(
        self, message: str, *, branch: str | None = None, index: int | None = None, **kwargs: Any
    ) -> None:
        self.branch = branch
        self.index = index
        super().__init__(message, **kwargs)


class RoutingError(RunError):
    """A `next` resolved to a name that is neither a node nor `$end`."""

    category = "routing_error"


class ReducerError(RunError):
    """A reducer rejected an update; names field, reducer and node, keeps the pre-merge state."""

    category = "reducer_error"

    def __init__(self, message: str, *, field: str, reducer: str, **kwargs: Any) -> None:
        self.field = field
        self.reducer = reducer
        super().__init__(message, **kwargs)


class StateValidationError(RunError):
    """Values failed the declared input or state schema; `fields` names them."""

    category = "state_validation_error"

    def __init__(self, message: str, *, fields: Sequence[str] = (), **kwargs: Any) -> None:
        self.fields = list(fields)
        super().__init__(message, **kwargs)


class PermissionDenied(RunError):
    """A run's capabilities do not allow a dispatch."""

    category = "permission_denied"


class LimitExceeded(RunError):
    """A run exceeded a limit such as `max_steps`."""

    category = "limit_exceeded"


class NestedTooDeeply(StateValidationError, LimitExceeded):
    """A value given to a run (inputs, state, a patch) nested past the nesting limit: a bad value
    (`StateValidationError`, naming the field) and a limit (`LimitExceeded`, its category)."""

    category = "limit_exceeded"


class NonFiniteNumber(StateValidationError):
    """A value holds NaN or ±Infinity, which JSON cannot write; the message gives its path."""

    category = "non_finite_number"


RUN_ERROR_CLASSES: dict[str, type[RunError]] = {
    "routing_error": RoutingError,
    "branch_failed": BranchFailed,
    "reducer_error": ReducerError,
    "state_validation_error": StateValidationError,
    "permission_denied": PermissionDenied,
    "limit_exceeded": LimitExceeded,
    "non_finite_number": NonFiniteNumber,
}


class ScheduleError(GraphrunnerError):
    """A schedule is invalid (bad cron, unknown time zone, ...) or an operation on it cannot be done."""


class ScheduleNotFound(ScheduleError):
    """No schedule has this id."""
