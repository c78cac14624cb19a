"""Canonical JSON: the prebuilt C encoder gives exactly ``json.dumps``'s canonical text.

Stored digests and effect identities depend on these bytes, so the faster path must not move
a single one of them: sorted keys, compact separators, non-ASCII kept, plain floats as
``repr``; a float ``repr`` writes in exponent form is spelled as the original (serde_json)
spells it instead (``1e-05`` → ``0.00001``, ``1e+16`` → ``1e16``), which ids depend on.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

import pytest

from agentctl.core.canonical import canonical_json, json_digest

VALUES: list[Any] = [
    None,
    True,
    0,
    -7,
    12345678901234567890123,
    1.0,
    1e15,
    0.0001,
    -0.0,
    3.141592653589793,
    "",
    'é ünïcode ✓ \u2028 \n " \\ \x00',
    [],
    {},
    {"b": 1, "a": [1, 2.5, {"z": None, "y": "x"}], "é": {"k": [True, False]}},
    [[[]], [{}], {"": ""}],
]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_same_text_as_json_dumps(value: Any) -> None:
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(value) == expected


def test_exponent_form_floats_are_spelled_as_the_original_spells_them() -> None:
    value = {
        "b": [1e-5, {"deep": [9.9e-6, -1e-7, 1e16]}, 1.5],
        "a": {"big": 1.2345678901234568e20, "text": "1e-05 and 1e+16", "n": 7},
        "s": ["1e-05", "x\\", 'q"1e+16,'],
    }
    assert canonical_json(value) == (
        '{"a":{"big":1.2345678901234568e20,"n":7,"text":"1e-05 and 1e+16"},'
        '"b":[0.00001,{"deep":[9.9e-6,-1e-7,1e16]},1.5],'
        '"s":["1e-05","x\\\\","q\\"1e+16,"]}'
    )
    assert canonical_json(1e-5) == "0.00001"
    assert canonical_json("1e-05") == '"1e-05"'


def test_digest_of_a_small_float() -> None:
    """spec/dsl.md §4.8: D = sha256 of the bindings' compact sorted-key JSON, as serde_json
    writes it: ``{"foreachIndex":0,"item":0.00001}``, never ``…"item":1e-05}``."""
    bindings = {"item": 0.00001, "foreachIndex": 0}
    assert json_digest(bindings) == hashlib.sha256(b'{"foreachIndex":0,"item":0.00001}').hexdigest()
    assert json_digest(bindings)[:12] == "264321243c1d"


def test_key_order_of_the_source_does_not_matter() -> None:
    assert canonical_json({"b": 1, "a": 2}) == canonical_json({"a": 2, "b": 1}) == '{"a":2,"b":1}'


def test_non_json_values_are_refused() -> None:
    with pytest.raises(TypeError):
        canonical_json({"x": object()})
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(RecursionError):
        canonical_json(cycle)


def test_one_shared_value_encoded_by_several_threads_at_once() -> None:
    """No shared circular-reference bookkeeping: threads encoding the same value agree."""
    shared = {"k": [{"n": i, "v": [i] * 50} for i in range(200)]}
    expected = json_digest(shared)
    found: list[str] = []

    def encode() -> None:
        found.extend(json_digest(shared) for _ in range(50))

    threads = [threading.Thread(target=encode) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert found == [expected] * 200
