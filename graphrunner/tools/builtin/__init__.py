"""The tools every graph may name without registering anything (DESIGN §2.2).

`BUILTIN_TOOLS` are graphrunner's own tools; `RYE_TOOLS` adapt Rye tools (named by their
Rye item ids) whose meaning is unambiguous here. The default registry holds both.
"""

from __future__ import annotations

from graphrunner.tools.base import Tool
from graphrunner.tools.builtin.basic import EchoTool, FailTool, SleepTool
from graphrunner.tools.builtin.http import HttpTool
from graphrunner.tools.builtin.python_tool import PythonTool
from graphrunner.tools.builtin.rye_tools import RyeBashTool, RyeControlTool
from graphrunner.tools.builtin.shell import ShellTool

BUILTIN_TOOLS: tuple[Tool, ...] = (
    PythonTool(),
    ShellTool(),
    HttpTool(),
    EchoTool(),
    FailTool(),
    SleepTool(),
)

RYE_TOOLS: tuple[Tool, ...] = (
    RyeBashTool(),
    RyeControlTool(),
)

__all__ = [
    "BUILTIN_TOOLS",
    "RYE_TOOLS",
    "EchoTool",
    "FailTool",
    "HttpTool",
    "PythonTool",
    "RyeBashTool",
    "RyeControlTool",
    "ShellTool",
    "SleepTool",
]
