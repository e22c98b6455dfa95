"""What the run explorer shows of a run's state: capped, so a huge state keeps it responsive."""

from __future__ import annotations

from graphrunner.ui.views import MAX_KEYS, PREVIEW_CHARS, capped_map


def test_a_state_with_more_keys_than_shown_counts_the_rest() -> None:
    state = {f"k{i:04}": i for i in range(MAX_KEYS + 50)}
    shown, cap = capped_map(state)
    assert list(shown) == [f"k{i:04}" for i in range(MAX_KEYS)]
    assert cap == {"keys_total": MAX_KEYS + 50, "keys_omitted": 50, "values_truncated": []}


def test_a_large_value_is_previewed_and_named() -> None:
    shown, cap = capped_map({"small": [1, 2], "blob": "x" * (10 * PREVIEW_CHARS)})
    assert shown["small"] == [1, 2]
    assert shown["blob"]["$truncated"] is True and len(shown["blob"]["preview"]) == PREVIEW_CHARS
    assert cap == {"keys_total": 2, "keys_omitted": 0, "values_truncated": ["blob"]}
