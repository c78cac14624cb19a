"""Floats as text the way the original writes them (serde_json, with ryu's layout).

The expected spellings are those of the ``ryu`` crate's own tests (``pretty``: 1.234e16,
1234000000000000.0, 5e-324, 2.9802322387695312e-8, …) and the layout rules of its
``pretty::format64``; Python's ``repr`` has the same digits, only laid out otherwise.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentctl.core.floattext import float_text, number_text, respell_json_floats

CASES = [
    # Four leading fractional zeros still read as a decimal; five are exponent form.
    (1e-5, "0.00001"),
    (9.9e-6, "9.9e-6"),
    (0.0001, "0.0001"),
    (0.00012345, "0.00012345"),
    (1e-6, "1e-6"),
    (-1e-7, "-1e-7"),
    (1.5e-7, "1.5e-7"),
    # Up to 16 integer digits as a decimal with ".0"; past that, exponent form without "+".
    (1e15, "1000000000000000.0"),
    (9999999999999998.0, "9999999999999998.0"),
    (9060801153433600.0, "9060801153433600.0"),
    (1e16, "1e16"),
    (1.234e16, "1.234e16"),
    (-2.109808898695963e16, "-2.109808898695963e16"),
    (1.2345678901234568e20, "1.2345678901234568e20"),
    (1e300, "1e300"),
    (1.7976931348623157e308, "1.7976931348623157e308"),
    (5e-324, "5e-324"),
    (2.2250738585072014e-308, "2.2250738585072014e-308"),
    (2.9802322387695312e-8, "2.9802322387695312e-8"),
    # Ordinary values, as before.
    (0.1, "0.1"),
    (1.5, "1.5"),
    (0.3, "0.3"),
    (100.0, "100.0"),
    (12.34, "12.34"),
    (2.718281828459045, "2.718281828459045"),
    (0.0, "0.0"),
    (-0.0, "-0.0"),
    (-1.0, "-1.0"),
]


@pytest.mark.parametrize(("value", "text"), CASES, ids=[t for _, t in CASES])
def test_a_float_is_written_as_ryu_writes_it(value: float, text: str) -> None:
    assert float_text(value) == text
    assert float(text) == value


def test_non_finite_floats_keep_the_json_module_spelling() -> None:
    assert [float_text(v) for v in (math.nan, math.inf, -math.inf)] == [
        "NaN",
        "Infinity",
        "-Infinity",
    ]


def test_numbers_as_text() -> None:
    assert number_text(7) == "7"
    assert number_text(-12345678901234567890123) == "-12345678901234567890123"
    assert number_text(1e-5) == "0.00001"
    assert number_text(1e16) == "1e16"


FINITE = st.floats(allow_nan=False, allow_infinity=False)


@given(FINITE)
def test_the_text_reads_back_as_the_same_float(value: float) -> None:
    assert float(float_text(value)) == value


@given(FINITE)
def test_plain_decimals_are_written_as_python_writes_them(value: float) -> None:
    """Only exponent-form spellings change: every digest of a plain float stays the same."""
    if "e" not in repr(value):
        assert float_text(value) == repr(value)
    else:
        assert "+" not in float_text(value) and "e-0" not in float_text(value)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | FINITE | st.text(alphabet='"\\e+-.,:]}01 5é'),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(JSON, st.sampled_from([None, 2]))
def test_respelling_changes_numbers_only(value: object, indent: int | None) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    respelled = respell_json_floats(text)
    assert json.loads(respelled) == value  # strings untouched, numbers the same values
    if "e+" not in text and "e-" not in text:
        assert respelled == text


def test_strings_that_look_like_numbers_stay_as_they_are() -> None:
    text = json.dumps({"a": "1e-05", "b": ["x\\", 1e-05], "c": 'q"1e+16,', "d": 1.5e16})
    assert respell_json_floats(text) == (
        '{"a": "1e-05", "b": ["x\\\\", 0.00001], "c": "q\\"1e+16,", "d": 1.5e16}'
    )
    assert respell_json_floats("1e-05") == "0.00001"
