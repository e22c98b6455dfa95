"""The `python` tool: call `pkg.module:callable` with keyword arguments."""

from __future__ import annotations

import asyncio
import errno
import inspect
import socket
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from graphrunner.arguments import ArgumentError, typed_arguments
from graphrunner.errors import ToolError
from graphrunner.importing import ImportFailed, import_callable
from graphrunner.tools.base import ToolContext, parse_params
from graphrunner.tracebacks import format_traceback, user_traceback

_CONNECTION_ERRNOS = frozenset(
    getattr(errno, name)
    for name in (
        "ECONNREFUSED",
        "ECONNRESET",
        "ECONNABORTED",
        "EPIPE",
        "ETIMEDOUT",
        "ENETUNREACH",
        "ENETDOWN",
        "ENETRESET",
        "EHOSTUNREACH",
        "EHOSTDOWN",
    )
    if hasattr(errno, name)
)


class PythonParams(BaseModel):
    """Params of `python`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fn: str
    args: dict[str, Any] = Field(default_factory=dict)


class PythonTool:
    """`python`: imports `fn` and returns `fn(**args)` (awaited if async, else in a thread).

    An argument whose parameter is annotated with a pydantic model arrives as that model.
    """

    name = "python"
    version = "1"

    async def run(self, params: dict[str, Any], context: ToolContext) -> Any:
        """Call the function; its exceptions become classified ToolErrors."""
        p = parse_params(PythonParams, params, self.name)
        fn = _load(p.fn)
        _check_arguments(p.fn, fn, p.args)
        try:
            args = typed_arguments(fn, p.args)
        except ArgumentError as exc:
            raise ToolError(
                f"tool 'python': {p.fn}: {exc}", error_type="ValidationError", classification="validation"
            ) from None
        try:
            return await _call(fn, args)
        except ToolError as exc:  # the function's own, classified: it keeps where it was raised
            if exc.traceback is None:
                exc.traceback = format_traceback(exc)
            raise
        except Exception as exc:
            raise _wrap(p.fn, exc) from exc


def _load(ref: str) -> Callable[..., Any]:
    """Import `ref`; a bad reference, or one that resolves to a callable defined outside the
    module it names (`ForeignCallable`), is a `validation` ToolError (with the traceback of the
    module's own code when importing it raised)."""
    try:
        return import_callable(ref)
    except ImportFailed as exc:
        raise ToolError(
            f"tool 'python': {exc}",
            error_type=type(exc).__name__,
            classification="validation",
            traceback=user_traceback(exc.__context__),
        ) from None


def _check_arguments(ref: str, fn: Callable[..., Any], args: dict[str, Any]) -> None:
    """Args that do not fit the function's signature are a `validation` ToolError."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # some builtins have no signature: let the call decide
    try:
        signature.bind(**args)
    except TypeError as exc:
        raise ToolError(
            f"tool 'python': args do not fit {ref}{signature}: {exc}",
            error_type="InvalidParams",
            classification="validation",
        ) from None


def _is_async(fn: Callable[..., Any]) -> bool:
    """True for a coroutine function or an object whose `__call__` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


async def _call(fn: Callable[..., Any], args: dict[str, Any]) -> Any:
    """Await an async function; run a sync one in a thread a timeout can abandon."""
    if _is_async(fn):
        return await fn(**args)
    result = await asyncio.to_thread(fn, **args)
    if inspect.isawaitable(result):  # e.g. a partial of an async function
        return await result
    return result


def _is_transient(exc: BaseException) -> bool:
    """Connection errors and timeouts are worth retrying."""
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    if isinstance(exc, socket.gaierror):
        return exc.errno == socket.EAI_AGAIN
    return isinstance(exc, OSError) and exc.errno in _CONNECTION_ERRNOS


def _wrap(ref: str, exc: Exception) -> ToolError:
    """The ToolError for an exception the function raised, with the function's frames."""
    kind = type(exc).__name__
    return ToolError(
        f"{ref}: {kind}: {exc}",
        error_type=kind,
        classification="transient" if _is_transient(exc) else "permanent",
        traceback=format_traceback(exc),
    )
