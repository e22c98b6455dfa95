"""What a run may hold (DESIGN §7): JSON data, nested at most MAX_DEPTH levels, within the
state size limit, JSON-encoded as the store writes it.

Inputs, the initial state and a resume's state patch are checked where they enter a run
(`check_size`); during the run each step's new state is checked by `check_step_state`.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from graphrunner.errors import LimitExceeded, StateValidationError
from graphrunner.text import SURROGATE, describe

SETTING = "GRAPHRUNNER_MAX_STATE_BYTES"
MAX_DEPTH = 64  # lists and mappings nested in one input or state field
MAX_INT_DIGITS = sys.int_info.default_max_str_digits  # 4300: Python cannot write longer integers as text
INT_LIMIT = 10**MAX_INT_DIGITS
CONTAINERS = (Mapping, list, tuple)
UNPAIRED = "holds a string with an unpaired surrogate, which is not valid Unicode"


def encoded_size(value: Any) -> int:
    """The size in bytes of `value` as JSON (ASCII-escaped, so characters are bytes)."""
    return len(json.dumps(value, default=str))


def over_limit(value: Mapping[str, Any], limit: int | None) -> int | None:
    """The encoded size of `value` when it exceeds `limit` bytes, else None (also without a limit)."""
    if limit is None:
        return None
    size = encoded_size(value)
    return size if size > limit else None


@dataclass(frozen=True)
class StateCheck:
    """The verdict on the state after a step: why it cannot be kept ("would make the state ...";
    None: it can), and the size as JSON of each changed value (None: nothing was encoded)."""

    problem: str | None = None
    sizes: dict[str, int] | None = None


def check_step_state(
    state: Mapping[str, Any], limit: int | None, changed: Collection[str] = ()
) -> StateCheck:
    """Check the state after a step against `limit` bytes as JSON.

    Without a limit nothing is checked; with one the state is encoded, the `changed` values
    each on their own (their sizes are kept for the step's record), which also finds a state
    nested too deeply to encode (about 1,000 levels, Python's recursion limit).
    """
    if limit is None:
        return StateCheck()
    try:
        sizes = {key: encoded_size(state[key]) for key in changed if key in state}
        size = _size_with(state, sizes)
    except RecursionError:
        return StateCheck("would make the state too deeply nested to encode as JSON")
    except (TypeError, ValueError) as exc:
        return StateCheck(f"would make the state impossible to encode as JSON ({exc})")
    if size > limit:
        return StateCheck(
            f"would make the state {size} bytes as JSON, over the limit of {limit} bytes ({SETTING})"
        )
    return StateCheck(sizes=sizes)


def _size_with(state: Mapping[str, Any], sizes: dict[str, int]) -> int:
    """The size of `state` as JSON (`encoded_size`), the values of `sizes` already measured."""
    if not sizes:
        return encoded_size(state)
    rest = {key: value for key, value in state.items() if key not in sizes}
    members = sum(len(json.dumps(key)) + 2 + size for key, size in sizes.items())  # `"key": value`
    if not rest:
        return 2 + members + 2 * (len(sizes) - 1)  # `{` `}` and the `, ` between members
    return encoded_size(rest) + members + 2 * len(sizes)  # a `, ` before each


def check_size(value: Mapping[str, Any], limit: int | None, what: str) -> None:
    """Check `value` (`what`: "the inputs", "the initial state", ...) as it enters a run.

    Raises `StateValidationError` naming the field when it is not JSON data nested at most
    MAX_DEPTH levels, and `LimitExceeded` when it is over `limit` bytes as JSON.
    """
    check_data(value, what)
    size = over_limit(value, limit)
    if size is not None:
        raise LimitExceeded(f"{what} is {size} bytes as JSON, over the limit of {limit} bytes ({SETTING})")


def check_data(fields: Mapping[str, Any], what: str) -> None:
    """Raise `StateValidationError` naming the first field of `fields` that is not JSON data."""
    for name, value in fields.items():
        if not isinstance(name, str) or not _plain_text(name):
            raise StateValidationError(f"{what}: {_bad_key(name)}", fields=[describe(name)])
        problem = data_problem(value)
        if problem:
            raise StateValidationError(f"{what}: '{name}' {problem}", fields=[name])


def data_problem(value: Any) -> str | None:
    """What makes `value` not JSON data within the limits ("is nested more than ..."), or None."""
    if not isinstance(value, CONTAINERS):
        return _scalar_problem(value)
    stack = [(value, 0)]  # containers only: scalars are checked where they are met
    while stack:
        container, depth = stack.pop()
        if depth >= MAX_DEPTH:
            return f"is nested more than {MAX_DEPTH} levels deep (the nesting limit)"
        if isinstance(container, Mapping):
            bad = [k for k in container if not isinstance(k, str) or not _plain_text(k)]
            if bad:
                return f"holds {_bad_key(bad[0])}"
        for member in container.values() if isinstance(container, Mapping) else container:
            if isinstance(member, CONTAINERS):
                stack.append((member, depth + 1))
            elif not (type(member) is str and member.isascii()):  # ASCII text: the common case
                problem = _scalar_problem(member)
                if problem:
                    return problem
    return None


def _plain_text(text: str) -> bool:
    return text.isascii() or not SURROGATE.search(text)


def _scalar_problem(item: Any) -> str | None:
    if item is None or isinstance(item, bool):
        return None
    if isinstance(item, str):
        return None if _plain_text(item) else UNPAIRED
    if isinstance(item, int):
        return None if abs(item) < INT_LIMIT else f"holds an integer of more than {MAX_INT_DIGITS} digits"
    if isinstance(item, float):
        return None if math.isfinite(item) else f"holds {item}: {item} is not a JSON number"
    return f"holds a {type(item).__name__}, which is not JSON data"


def _bad_key(key: Any) -> str:
    if isinstance(key, str):
        return "a key with an unpaired surrogate, which is not valid Unicode"
    return f"a key {describe(key)} that is not a string"
