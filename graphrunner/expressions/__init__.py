"""Expressions: `${...}` interpolation, path fallbacks, CEL, and conditions."""

from graphrunner.expressions.conditions import CompiledCondition, compile_condition
from graphrunner.expressions.rendering import render_text
from graphrunner.expressions.template import Constant, Template, compile_expression, compile_template

__all__ = [
    "CompiledCondition",
    "Constant",
    "Template",
    "compile_condition",
    "compile_expression",
    "compile_template",
    "render_text",
]
