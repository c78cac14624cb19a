"""A digest hashed item by item is the digest of the whole canonical text."""

from __future__ import annotations

from typing import Any

import pytest

from agentctl.core.canonical import Items, json_digest, streamed_json_digest

TASKS = [{"id": f"t{i}", "with": {"ü": i / 3, "b": [True, None, '"q"\n']}} for i in range(5)]


def _lazy(tasks: list[Any]) -> Items:
    return Items(dict(task) for task in tasks)


@pytest.mark.parametrize(
    ("whole", "streamed"),
    [
        (
            {"z": 1, "tasks": TASKS, "a": {"k": "v"}},
            {"z": 1, "tasks": _lazy(TASKS), "a": {"k": "v"}},
        ),
        (
            {"spec": {"tasks": TASKS, "vars": {}}, "kind": "W"},
            {"spec": {"tasks": _lazy(TASKS), "vars": {}}, "kind": "W"},
        ),
        ({"tasks": [], "n": 0}, {"tasks": Items(iter(())), "n": 0}),
        (TASKS, _lazy(TASKS)),
        ({"plain": TASKS}, {"plain": TASKS}),
    ],
)
def test_streamed_digest_equals_the_whole_texts_digest(whole: Any, streamed: Any) -> None:
    assert streamed_json_digest(streamed) == json_digest(whole)
