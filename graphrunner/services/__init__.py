"""What a step does around the pure engine: dispatch, result cache, hooks, transcript records.

Shared by the in-process runner (`graphrunner.runner`) and the cluster (`graphrunner.cluster`).
"""

from graphrunner.services.dispatch import Deferred, classify, dispatch, retry_delay
from graphrunner.services.step_services import INLINE_WAIT, StepServices, tool_context

__all__ = ["INLINE_WAIT", "Deferred", "StepServices", "classify", "dispatch", "retry_delay", "tool_context"]
