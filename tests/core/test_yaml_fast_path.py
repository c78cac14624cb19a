"""The fast YAML path (libyaml events, no node tree) agrees with the exact path.

For every document it accepts, the value and the plain-scalar texts equal the exact path's;
anything the exact path must decide (anchors, tags, duplicate keys, odd numbers, errors) is
left to it, so diagnostics keep their exact wording and positions — computed on demand.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentctl.core.dsl import load_workflow
from agentctl.core.dsl.yamlevents import _by_patterns, _plain_scalar, _Unusual, parse_fast
from agentctl.core.dsl.yamlload import _parse_exact, parse_yaml
from agentctl.errors import ValidationError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").rglob("*.yaml"))

TRICKY = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: 1.10, labels: { a: "1", b: yes, c: on, d: 2024-01-01 } }
spec:
  vars:
    ints: [0, -3, +4, 0o17, 0x1F, 007]
    floats: [1.5, -.5, 1e3, 2.]
    bools: [true, True, TRUE, false, False, FALSE]
    nulls: [~, null, Null, NULL, ]
    empty:
    quoted: ['true', "1", "null", '']
    block: |
      line one
      line two
    folded: >
      a
      b
    nested: [[1, [2, {k: [3]}]], {}]
  tasks:
    - { id: t, uses: "action:a", with: { n: 1.10, s: "x" } }
"""


def _both(text: str) -> None:
    fast = parse_fast(text)
    assert fast is not None, "the fast path should take this document"
    exact = _parse_exact(text, None)
    assert fast.value == exact.value
    assert fast.plain_texts == exact.plain_texts


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_parse_the_same_on_both_paths(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    if "&" in text or "*" in text:
        assert parse_fast(text) is None
        return
    _both(text)


def test_scalar_typing_matches_the_exact_path() -> None:
    _both(TRICKY)
    value = parse_fast(TRICKY)
    assert value is not None
    vars_ = value.value["spec"]["vars"]
    assert vars_["ints"] == [0, -3, 4, 15, 31, "007"]  # a leading zero keeps it text
    assert vars_["bools"] == [True, True, True, False, False, False]
    assert vars_["nulls"] == [None, None, None, None]  # a trailing comma adds nothing
    assert vars_["quoted"] == ["true", "1", "null", ""]
    assert value.value["metadata"]["labels"] == {"a": "1", "b": "yes", "c": "on", "d": "2024-01-01"}
    assert value.plain_texts["metadata.name"] == "1.10"


@pytest.mark.parametrize(
    ("plain", "value"),
    [
        # digits with a redundant leading zero are text, as serde_yaml (the original) reads them
        ("007", "007"),
        ("-01", "-01"),
        ("+01", "+01"),
        ("00", "00"),
        ("0", 0),
        ("-0", 0),
        ("00.5", 0.5),
        ("01e3", 1000.0),
        # binary, and the radix forms with a sign, are integers there too
        ("0b101", 5),
        ("-0b101", -5),
        ("-0x1F", -31),
        ("+0x1F", 31),
        ("-0o17", -15),
        ("+0o17", 15),
        # an upper-case prefix or a bare one stays text
        ("0X1F", "0X1F"),
        ("0B1", "0B1"),
        ("0x", "0x"),
        ("0b", "0b"),
    ],
)
def test_numbers_read_as_the_original_reads_them(plain: str, value: object) -> None:
    text = f"v: {plain}\nl: [{plain}]\n"
    _both(text)
    fast = parse_fast(text)
    assert fast is not None
    assert fast.value == {"v": value, "l": [value]}
    assert type(fast.value["v"]) is type(value)


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\na: 2\n",  # duplicate key
        "1: x\n'1': y\n",  # a duplicate key once a plain number is taken as its text
        "a: !!str 5\n",  # an explicit tag
        "a: &x 1\nb: *x\n",  # anchors and aliases
        "a: .inf\n",  # not finite
        "a: " + "9" * 50 + "\n",  # too long an integer
        "a: 1\n---\nb: 2\n",  # two documents
        "",  # empty
        "just text\n",  # a root that is not a collection
        "a: [1, 2\n",  # a libyaml error
        "[" * 130 + "]" * 130 + "\n",  # deeper than the limit
        "? [1]\n: x\n",  # a collection as a key
        "a: 1\n'a': 2\n",  # a duplicate key, quoted the second time
        "!!int 1: x\n",  # a tagged key
    ],
)
def test_what_the_exact_path_decides_is_left_to_it(text: str) -> None:
    assert parse_fast(text) is None


@pytest.mark.parametrize(
    "text",
    [
        '"true": 1\n\'1\': [a, {"null": x}]\n',  # quoted keys are strings, whatever they say
        "a: {b: [1, {c: 2.5}], d: [[], {}]}\ne: [x, [y, [z: 3]]]\n",  # nesting, both ways
        "- a\n- {k: v}\n- [1, true]\n",  # a sequence at the root
        "t0: x\nnull0: y\ntrue1: z\n",  # plain keys that only start like null or a boolean
        # plain keys typed as numbers, booleans or null: their text, as written
        "1: a\ntrue: b\n0x10: c\n~: d\n1.50: e\nnull: f\n.inf: g\n2024: {TRUE: [h]}\n",
        "a: [{? : e}]\n",  # an empty key: the empty text
    ],
)
def test_keys_and_nesting_match_the_exact_path(text: str) -> None:
    _both(text)


def test_positions_are_computed_only_when_asked_and_match() -> None:
    parsed = parse_yaml(TRICKY)
    assert parsed.tables is None  # the fast path recorded none
    assert parsed.positions == _parse_exact(TRICKY, None).positions
    assert parsed.positions["spec.tasks.0.with.n"] == (20, 45)


def test_a_schema_problem_in_a_fast_parsed_document_is_located() -> None:
    text = TRICKY.replace('uses: "action:a"', "uses: 5")
    assert parse_fast(text) is not None
    with pytest.raises(ValidationError) as caught:
        load_workflow(text, file="wf.yaml")
    located = {(d.path, d.line, d.column) for d in caught.value.diagnostics}
    assert ("spec.tasks.0.uses", 20, 22) in located


# Pieces of the texts the patterns type: the words, numbers' prefixes, the specials.
_PIECES = ["true", "True", "FALSE", "null", "Null", "NULL", "0x", "0o", ".inf", ".nan", "1e3"]


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from([*"tTfFnN0123456789+-.eExoab_~ \n:é٣", *_PIECES])).map("".join))
@example("true\n")  # the patterns' ``$`` takes a final newline
@example("NULL\n")
def test_the_plain_scalar_shortcuts_type_as_the_patterns_do(text: str) -> None:
    """The fast path types ids and counts without the patterns, to the same value."""

    def typed(how: Callable[[str], tuple[Any, bool]]) -> object:
        try:
            value, is_typed = how(text)
        except _Unusual:
            return "unusual"
        return type(value), value, is_typed

    assert typed(_plain_scalar) == typed(_by_patterns)
