"""What a run may hold (DESIGN §7): JSON data, nested at most MAX_DEPTH levels, with finite
numbers only, within the state size limit, JSON-encoded as the store writes it.

One walk, `value_problem`, judges a value wherever it enters a run: inputs, the initial state
and a resume's state patch (`check_size`), an action's params and a tool's result
(`services/dispatch.py`, `engine/plan.py`), the changed values of the state after a step's
reducers (`check_step_state`), and the values a transcript record carries
(`services/records.py`). Its verdict names the category of the problem (`limit_exceeded` for
the nesting limit, `non_finite_number` for NaN and ±Infinity) and the path of the value.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any

from graphrunner.errors import (
    LimitExceeded,
    NestedTooDeeply,
    NonFiniteNumber,
    StateValidationError,
)
from graphrunner.text import SURROGATE, describe

SETTING = "GRAPHRUNNER_MAX_STATE_BYTES"
MAX_DEPTH = 64  # lists and mappings nested in one input or state field
MAX_INT_DIGITS = sys.int_info.default_max_str_digits  # 4300: Python cannot write longer integers as text
INT_LIMIT = 10**MAX_INT_DIGITS
CONTAINERS = (Mapping, list, tuple)
UNPAIRED = "holds a string with an unpaired surrogate, which is not valid Unicode"
NESTING = "limit_exceeded"  # the category of a value nested past MAX_DEPTH
NON_FINITE = "non_finite_number"  # the category of NaN and ±Infinity
NOT_DATA = "state_validation_error"  # the category of anything else that is not JSON data


@dataclass(frozen=True)
class DataProblem:
    """Why a value cannot enter a run: its category (NESTING, NON_FINITE, NOT_DATA), what is wrong
    ("holds nan: ..."), and where, as a path from the value (`[3].score`; "" for the value itself)."""

    category: str
    problem: str
    path: str = ""

    def describe(self, where: str) -> str:
        """The problem of the value at `where` ("result", "state.x"), its path appended."""
        return f"{where}{self.path} {self.problem}"


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
    category: str = NESTING


def check_step_state(
    state: Mapping[str, Any], limit: int | None, changed: Collection[str] = ()
) -> StateCheck:
    """Check the state after a step: its `changed` values are JSON data within the nesting limit
    with finite numbers (`value_problem`), and the state is within `limit` bytes as JSON.

    Without a limit the size is not measured; with one the state is encoded, the `changed`
    values each on their own (their sizes are kept for the step's record).
    """
    for key in changed:
        if key in state:
            found = value_problem(state[key])
            if found is not None:
                problem = f"made a state value that cannot be kept: {found.describe(f'state.{key}')}"
                return StateCheck(problem, category=found.category)
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
    """Raise an error naming the first field of `fields` that is not JSON data within the limits:
    `NestedTooDeeply`, `NonFiniteNumber` or `StateValidationError` (all `StateValidationError`)."""
    for name, value in fields.items():
        if not isinstance(name, str) or not _plain_text(name):
            raise StateValidationError(f"{what}: {_bad_key(name)}", fields=[describe(name)])
        found = value_problem(value)
        if found is not None:
            error = ERRORS.get(found.category, StateValidationError)
            raise error(f"{what}: {found.describe(repr(name))}", fields=[name])


ERRORS: dict[str, type[StateValidationError]] = {NESTING: NestedTooDeeply, NON_FINITE: NonFiniteNumber}


def value_problem(value: Any) -> DataProblem | None:
    """Why `value` cannot enter a run (not JSON data, nested more than MAX_DEPTH levels, a NaN or
    ±Infinity), or None. One walk over the containers, each linked to its parent: the path is
    spelled out only for a problem."""
    if not isinstance(value, CONTAINERS):
        found = _scalar_problem(value)
        return None if found is None else DataProblem(_category(value), found)
    stack: list[tuple[Any, int, tuple[Any, ...]]] = [(value, 0, ())]  # containers: scalars are met
    while stack:
        container, depth, path = stack.pop()
        if depth >= MAX_DEPTH:
            problem = f"is nested more than {MAX_DEPTH} levels deep (the nesting limit)"
            return DataProblem(NESTING, problem)  # its path would be MAX_DEPTH keys long
        if isinstance(container, Mapping):
            bad = [k for k in container if not isinstance(k, str) or not _plain_text(k)]
            if bad:
                return DataProblem(NOT_DATA, f"holds {_bad_key(bad[0])}", _path(path))
            members: Any = container.items()
        else:
            members = enumerate(container)
        for key, member in members:
            if isinstance(member, CONTAINERS):
                stack.append((member, depth + 1, (path, key)))
            elif not (type(member) is str and member.isascii()):  # ASCII text: the common case
                found = _scalar_problem(member)
                if found:
                    return DataProblem(_category(member), found, _path((path, key)))
    return None


def fields_problem(value: Any) -> DataProblem | None:
    """`value_problem` of each member of a mapping of fields (state, inputs, an output), with the
    field's name in the path; of `value` itself when it is not a mapping."""
    if not isinstance(value, Mapping):
        return value_problem(value)
    for name, member in value.items():
        if not isinstance(name, str) or not _plain_text(name):
            return DataProblem(NOT_DATA, f"holds {_bad_key(name)}")
        found = value_problem(member)
        if found is not None:
            return replace(found, path=_path(((), name)) + found.path)
    return None


def finite_copy(value: Any) -> Any:
    """`value` with every NaN and ±Infinity replaced by None (a graph's `non_finite: "null"`).

    Called only once `value_problem` found one: the common case never copies."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: finite_copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_copy(v) for v in value]
    return value


def _category(item: Any) -> str:
    return NON_FINITE if isinstance(item, float) and not math.isfinite(item) else NOT_DATA


def _path(linked: tuple[Any, ...]) -> str:
    """`(((), "items"), 3)` as `.items[3]`: a path kept as links to its parent, spelled out."""
    parts: list[str] = []
    while linked:
        linked, key = linked
        parts.append(f"[{key}]" if isinstance(key, int) else f".{key}" if _plain_key(key) else f"[{key!r}]")
    return "".join(reversed(parts))


def _plain_key(key: Any) -> bool:
    return isinstance(key, str) and key.isidentifier()


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
