"""Tracebacks kept in transcript records and run errors: formatted as Python prints them, capped.

A failing Python tool keeps the frames of the user's function (graphrunner's and asyncio's
frames that lead to it are left out); an unexpected exception keeps every frame. Either way
at most the innermost `MAX_FRAMES` frames of each exception in the chain are kept, and at most
the last `MAX_CHARS` characters of the text (where the exception itself is printed).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import threading
import traceback
from pathlib import Path
from types import TracebackType

MAX_FRAMES = 30
MAX_CHARS = 8192
# where the frames that call a tool live: this package, asyncio, thread pools, imports
_INTERNAL = (
    str(Path(__file__).parent) + "/",
    str(Path(asyncio.__file__ or "").parent) + "/",
    str(Path(concurrent.futures.__file__ or "").parent) + "/",
    threading.__file__ or "threading.py",
    str(Path(importlib.__file__ or "").parent) + "/",
    "<frozen importlib",
)


def format_traceback(exc: BaseException, *, user_frames: bool = True) -> str:
    """`exc`'s traceback as text, capped (see the module docstring).

    `user_frames`: leave out the leading frames of graphrunner, asyncio and thread pools
    (how the tool was called), unless every frame is one of theirs.
    """
    tb = exc.__traceback__
    if user_frames:
        tb = _from_user_code(tb)
    lines = traceback.TracebackException(type(exc), exc, tb, limit=-MAX_FRAMES).format()
    return cap("".join(lines))


def user_traceback(exc: BaseException | None) -> str | None:
    """`format_traceback(exc)` when a frame of `exc`'s traceback is user code (not graphrunner's,
    asyncio's, a thread pool's or the import machinery's); else None."""
    tb = exc.__traceback__ if exc is not None else None
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_INTERNAL):
            assert exc is not None
            return format_traceback(exc)
        tb = tb.tb_next
    return None


def cause_traceback(exc: BaseException) -> str | None:
    """The traceback of the exception `exc` was raised from, when that one was raised in user
    code (a routing function, a custom reducer); else None."""
    return user_traceback(exc.__cause__)


def cap(text: str, limit: int = MAX_CHARS) -> str:
    """The last `limit` characters of `text` from a line start, saying how much was cut."""
    text = text.rstrip("\n")
    if len(text) <= limit:
        return text
    tail = text[-limit:]
    start = tail.find("\n") + 1  # 0 when there is no line break: the tail as it is
    tail = tail[start:]
    return f"[traceback cut: its first {len(text) - len(tail)} characters are left out]\n{tail}"


def _from_user_code(tb: TracebackType | None) -> TracebackType | None:
    """`tb` from its first frame outside graphrunner, asyncio and thread pools; `tb` when none is."""
    first = tb
    while first is not None and first.tb_frame.f_code.co_filename.startswith(_INTERNAL):
        first = first.tb_next
    return first if first is not None else tb
