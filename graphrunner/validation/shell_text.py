"""`shell_interpolation`: a `${...}` pasted into text that a shell parses, where a value could
run commands of its own (`; rm -rf ~`, `$(...)`, a `'` that closes the quotes around it).

Shell text is the `command` of the `shell` tool and of Rye's bash tool (`/bin/sh -c`), and the
script after `-c` in an argv that starts a POSIX shell (`argv: [sh, -c, "..."]`; the arguments
after the script are `$0`, `$1`, ... and are safe). An interpolation there is safe when it is
one call of `shell_quote` around the whole expression, written where the shell reads a word:
not inside quotes the graph wrote, which undo the quoting (inside `"..."` the shell still
expands `$(...)` in the value). A whole command that is one expression is reported too: the
shell runs whatever that value holds.

The scan of the literal text follows POSIX quoting (`'...'`, `"..."`, `\\`, `$(...)`, backquotes)
well enough for commands written in a graph; it is not a shell parser and never raises.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from graphrunner.errors import ExpressionError
from graphrunner.expressions.functions import SHELL_QUOTE, called
from graphrunner.expressions.scanner import split_template
from graphrunner.model import ActionNode, ForeachNode, GraphSpec
from graphrunner.report import Issue

CODE = "shell_interpolation"
# tool name -> its params whose text `/bin/sh -c` runs
SHELL_TEXT_PARAMS: Mapping[str, tuple[str, ...]] = {
    "shell": ("command",),
    "rye/bash/bash": ("command",),
    "rye/bash": ("command",),
}
SHELLS = frozenset({"sh", "bash", "dash", "ash", "ksh", "mksh", "zsh", "yash", "busybox-sh"})
OPTION_ARGUMENT = frozenset({"-o", "+o", "-O", "+O"})  # shell options that take the next argument
MAX_NAMED = 3  # expressions named in one message


@dataclass(frozen=True)
class Finding:
    """One `${...}` of shell text that is not safely quoted, and why."""

    body: str
    inside_quotes: bool  # written inside quotes of the command (quoted or not)
    quoted: bool  # a `shell_quote(...)` call (then it is only unsafe inside quotes)


def shell_interpolations(spec: GraphSpec) -> list[Issue]:
    """One `shell_interpolation` warning per param of shell text holding an unsafe `${...}`."""
    issues = []
    for node, where, tool, params in _dispatches(spec):
        for location, text in _shell_texts(tool, params, f"{where}.params"):
            message = _problem(text)
            if message is not None:
                subject = f"node '{node}': {location.removeprefix(f'nodes.{node}.')}" if node else location
                issues.append(Issue(CODE, f"{subject}: {message}", node=node, location=location))
    return issues


def _dispatches(spec: GraphSpec) -> Iterator[tuple[str | None, str, str, dict[str, Any]]]:
    """(node, location of the action, tool, params) for every action of nodes and hooks."""
    for name, n in spec.nodes.items():
        if isinstance(n, ActionNode | ForeachNode) and n.action is not None:
            yield name, f"nodes.{name}.action", n.action.tool, n.action.params
    for i, hook in enumerate(spec.config.hooks):
        yield None, f"config.hooks.{i}.action", hook.action.tool, hook.action.params


def _shell_texts(tool: str, params: Mapping[str, Any], where: str) -> Iterator[tuple[str, str]]:
    """(location, text) of every param of `tool` whose text a shell parses."""
    for key in SHELL_TEXT_PARAMS.get(tool, ()):
        if isinstance(params.get(key), str):
            yield f"{where}.{key}", params[key]
    argv = params.get("argv") if tool == "shell" else None
    if isinstance(argv, list | tuple):
        index = script_index(argv)
        if index is not None and isinstance(argv[index], str):
            yield f"{where}.argv.{index}", argv[index]


def script_index(argv: list[Any] | tuple[Any, ...]) -> int | None:
    """The index of the script in an argv that runs a POSIX shell with `-c`, else None
    (`[sh, -c, SCRIPT, ...]`, `[bash, -euo, pipefail, -c, SCRIPT]`, `[/usr/bin/env, sh, -c, SCRIPT]`)."""
    start = 1 if argv and isinstance(argv[0], str) and PurePosixPath(argv[0]).name == "env" else 0
    while start < len(argv) and isinstance(argv[start], str) and "=" in argv[start]:
        start += 1  # env's NAME=value
    if start >= len(argv) or not isinstance(argv[start], str):
        return None
    if PurePosixPath(argv[start]).name not in SHELLS:
        return None
    i = start + 1
    while i < len(argv) and isinstance(argv[i], str) and argv[i][:1] in ("-", "+") and argv[i] != "--":
        option = argv[i]
        if option in OPTION_ARGUMENT:
            i += 2
            continue
        if option.startswith("-") and not option.startswith("--") and "c" in option[1:]:
            return i + 1 if i + 1 < len(argv) else None
        i += 1
    return None


def _problem(text: str) -> str | None:
    """What is unsafe about the `${...}` of one shell text, worded with its fix; None when nothing is."""
    try:
        parts = split_template(text)
    except ExpressionError:  # reported as bad_expression
        return None
    if len(parts) == 1 and parts[0][0]:
        body = parts[0][1]
        if called(body) == SHELL_QUOTE:
            return None
        return (
            f"the whole command is ${{{body}}}, so the shell runs whatever that value holds; "
            f"write the command in the graph and quote each value in it with ${{{SHELL_QUOTE}(...)}}, "
            "or run an argv without a shell"
        )
    findings = _findings(parts)
    unquoted = [f for f in findings if not f.quoted]
    if unquoted:
        return _unquoted_message(unquoted)
    inside = [f for f in findings if f.inside_quotes]
    if inside:
        return (
            f"{_names(inside)} {'is' if len(inside) == 1 else 'are'} written inside quotes, which undo "
            f'{SHELL_QUOTE}\'s own quoting (inside "..." the shell still expands $(...) in the value): '
            "remove the quotes around it"
        )
    return None


def _unquoted_message(unquoted: list[Finding]) -> str:
    verb = "is" if len(unquoted) == 1 else "are"
    fixes = ", ".join(f"${{{SHELL_QUOTE}({f.body})}}" for f in unquoted[:MAX_NAMED])
    place = "its place" if len(unquoted) == 1 else "their places"
    inside = [f for f in unquoted if f.inside_quotes]
    drop = f", and drop the quotes written around {_names(inside)}" if inside else ""
    return (
        f"{_names(unquoted)} {verb} pasted into text that a shell parses, so a value holding ';', "
        f"'$(...)' or a quote would run commands of its own; write {fixes} in {place}{drop}"
    )


def _names(findings: list[Finding]) -> str:
    names = [f"${{{f.body}}}" for f in findings[:MAX_NAMED]]
    more = len(findings) - len(names)
    return ", ".join(names) + (f" and {more} more" if more else "")


def _findings(parts: list[tuple[bool, str]]) -> list[Finding]:
    """Every expression of shell text that is not plain `shell_quote(...)` at word level."""
    findings = []
    quoting = _Quoting()
    for is_expression, text in parts:
        if not is_expression:
            quoting.read(text)
            continue
        quoted = called(text) == SHELL_QUOTE
        if not quoted or quoting.inside_quotes:
            findings.append(Finding(text, quoting.inside_quotes, quoted))
    return findings


class _Quoting:
    """Where a POSIX shell is in its quoting after the text read so far: a stack of contexts
    (`word`, `'`, `"`, `$(` and a backquote), with the parentheses open inside each `$(`."""

    def __init__(self) -> None:
        self.stack = ["word"]
        self.depths = [0]
        self.escaped = False

    @property
    def inside_quotes(self) -> bool:
        """True inside `'...'` or `"..."` (not inside a `$(...)` that is itself inside quotes)."""
        return self.stack[-1] in ("'", '"')

    def read(self, text: str) -> None:
        """Follow the quoting through `text`."""
        i = 0
        while i < len(text):
            i += self._step(text, i)

    def _step(self, text: str, i: int) -> int:
        """Follow one token at `text[i]`; returns its length."""
        ch, top = text[i], self.stack[-1]
        if self.escaped:
            self.escaped = False
        elif top == "'":
            if ch == "'":
                self._pop()
        elif ch == "\\":
            self.escaped = True
        elif text.startswith("$(", i):
            self._push("$(")
            return 2
        else:
            self._special(ch, top)
        return 1

    def _special(self, ch: str, top: str) -> None:
        """Follow a quote, backquote or parenthesis written outside single quotes."""
        if ch == "`":
            self._pop() if top == "`" else self._push("`")
        elif top == '"':
            if ch == '"':
                self._pop()
        elif ch in "'\"":
            self._push(ch)
        elif top == "$(" and ch in "()":
            self._paren(ch)

    def _paren(self, ch: str) -> None:
        if ch == "(":
            self.depths[-1] += 1
        elif self.depths[-1]:
            self.depths[-1] -= 1
        else:  # closes the `$(`
            self._pop()

    def _push(self, context: str) -> None:
        self.stack.append(context)
        self.depths.append(0)

    def _pop(self) -> None:
        if len(self.stack) > 1:
            self.stack.pop()
            self.depths.pop()
