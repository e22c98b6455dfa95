"""The tools every graph may name without registering anything (DESIGN §2.2)."""

from __future__ import annotations

from graphrunner.tools.base import Tool
from graphrunner.tools.builtin.basic import EchoTool, FailTool, SleepTool
from graphrunner.tools.builtin.http import HttpTool
from graphrunner.tools.builtin.python_tool import PythonTool
from graphrunner.tools.builtin.shell import ShellTool

BUILTIN_TOOLS: tuple[Tool, ...] = (
    PythonTool(),
    ShellTool(),
    HttpTool(),
    EchoTool(),
    FailTool(),
    SleepTool(),
)

__all__ = [
    "BUILTIN_TOOLS",
    "EchoTool",
    "FailTool",
    "HttpTool",
    "PythonTool",
    "ShellTool",
    "SleepTool",
]
