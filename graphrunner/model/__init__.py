"""The graph model: frozen pydantic classes for every part of the graph language."""

from graphrunner.model.actions import DEFAULT_RETRY, Action, RetryPolicy
from graphrunner.model.base import END, FIELD_NAME, NODE_NAME
from graphrunner.model.conditions import Condition, StructuredCondition
from graphrunner.model.edges import Branch, Next
from graphrunner.model.graph import GraphConfig, GraphSpec, Hook, HookEvent
from graphrunner.model.nodes import (
    ActionNode,
    AnyNode,
    ErrorMode,
    ForeachNode,
    GateNode,
    ParallelBranch,
    ParallelNode,
    PauseNode,
    ReturnNode,
    SubgraphNode,
)
from graphrunner.model.state import InputField, ReducerRef, StateField

__all__ = [
    "DEFAULT_RETRY",
    "END",
    "FIELD_NAME",
    "NODE_NAME",
    "Action",
    "ActionNode",
    "AnyNode",
    "Branch",
    "Condition",
    "ErrorMode",
    "ForeachNode",
    "GateNode",
    "GraphConfig",
    "GraphSpec",
    "Hook",
    "HookEvent",
    "InputField",
    "Next",
    "ParallelBranch",
    "ParallelNode",
    "PauseNode",
    "ReducerRef",
    "RetryPolicy",
    "ReturnNode",
    "StateField",
    "StructuredCondition",
    "SubgraphNode",
]
