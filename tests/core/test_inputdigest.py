"""The resolved input digest, spelled member by member, is ``v1_digest`` of its object.

Stored input digests decide what retry and repair reuse, so the spelling that reuses outputs'
texts must give the very bytes encoding the whole object gives — with or without a text, and
never from a text of another value than the one the view holds.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentctl.core import evaluate as ev
from agentctl.core.canonical import canonical_json, v1_digest
from agentctl.core.inputdigest import resolved_input_digest
from agentctl.core.plan import PlannedTask

_KEYS = st.sampled_from(["a", "B", "é", "_", "z1", "10", "2", "ab", " ", 'q"', "\u2028"])
_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=8,
)
_IDS = st.lists(st.sampled_from(["t1", "T1", "t10", "t2", "é", "b-2", "x"]), max_size=4)


class _Task:
    def __init__(self, needs: tuple[str, ...]) -> None:
        self.needs = needs


@given(
    needs=_IDS,
    outputs=st.dictionaries(st.sampled_from(["t1", "T1", "t10", "t2", "é"]), _VALUES),
    known=st.lists(st.sampled_from(["given", "stale", "none"]), min_size=8, max_size=8),
    inputs=st.dictionaries(_KEYS, _VALUES, max_size=2),
    memory=st.dictionaries(_KEYS, _VALUES, max_size=2),
    vars_=st.dictionaries(_KEYS, _VALUES, max_size=2),
)
def test_same_digest_as_the_whole_object(
    needs: list[str],
    outputs: dict[str, Any],
    known: list[str],
    inputs: dict[str, Any],
    memory: dict[str, Any],
    vars_: dict[str, Any],
) -> None:
    texts = {}
    for (task_id, value), how in zip(outputs.items(), known, strict=False):
        if how == "given":
            texts[task_id] = ev.Encoded(value, canonical_json(value))
        elif how == "stale":  # a text of another value: never used for this one
            texts[task_id] = ev.Encoded({"other": 1}, '{"other":1}')
    view = ev.RuntimeView(inputs, memory, outputs=outputs, output_texts=texts)
    task: Any = _Task(tuple(dict.fromkeys(needs)))
    planned: PlannedTask = task
    whole = {
        "inputs": inputs,
        "memory": memory,
        "vars": vars_,
        "upstream": {need: outputs.get(need) for need in planned.needs},
    }
    assert resolved_input_digest(planned, {"vars": vars_}, view) == v1_digest(whole)
