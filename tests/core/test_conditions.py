"""Conditions: truthiness, operators, identity equality and audited decisions (spec/dsl.md §6.3)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentctl.core.canonical import v1_digest
from agentctl.core.conditions import (
    Condition,
    TemplateError,
    check_condition,
    decision,
    evaluate,
    json_identical,
    parse_condition,
    truthy,
)


def ctx(**inputs: Any) -> dict[str, Any]:
    return {"inputs": inputs, "vars": {}, "memory": {}, "tasks": {}}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, False),
        (True, True),
        (False, False),
        (0, False),
        (0.0, False),
        (-2, True),
        (0.5, True),
        ("", False),
        ("0", True),
        ([], False),
        ([0], True),
        ({}, False),
        ({"a": None}, True),
    ],
)
def test_truthiness(value: Any, expected: bool) -> None:
    assert truthy(value) is expected
    assert evaluate("inputs.v", ctx(v=value)) is expected
    assert evaluate("not inputs.v", ctx(v=value)) is (not expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("inputs.n == 3", True),
        ("inputs.n != 3", False),
        ("inputs.n <= 3", True),
        ("inputs.n >= 4", False),
        ("inputs.n < 3.5", True),
        ("inputs.n > -1", True),
        ("inputs.s == go", True),
        ("inputs.s == 'go'", True),
        ('inputs.s == "go"', True),
        ("inputs.s != stop", True),
        ('inputs.o == {"k": [1, null]}', True),
        ("not inputs.n == 3", False),
        ("${{ inputs.n == 3 }}", True),
        ("  ${{ not inputs.n > 5 }}  ", True),
    ],
)
def test_operators(text: str, expected: bool) -> None:
    assert evaluate(text, ctx(n=3, s="go", o={"k": [1, None]})) is expected


def test_operator_order_prefers_two_character_operators() -> None:
    cond = parse_condition("inputs.n <= 3")
    assert (cond.operator, cond.literal) == ("<=", 3)
    assert parse_condition("inputs.n >= 3").operator == ">="


def test_first_operator_in_the_fixed_order_wins() -> None:
    # `==` is tried before `>`, so this splits at `==` and the left side is not a path.
    with pytest.raises(TemplateError):
        parse_condition('inputs.s > "a==b"')
    assert parse_condition("inputs.s == a>b").literal == "a>b"


@pytest.mark.parametrize(
    ("value", "literal"),
    [(True, "1"), (1, "true"), (1, "1.0"), (1.0, "1"), ("1", "1"), (None, "0"), ([1], "[true]")],
)
def test_equality_is_exact_json_identity(value: Any, literal: str) -> None:
    assert evaluate(f"inputs.v == {literal}", ctx(v=value)) is False
    assert evaluate(f"inputs.v != {literal}", ctx(v=value)) is True


def test_json_identical_is_deep_and_typed() -> None:
    assert json_identical({"a": [1, "x", None]}, {"a": [1, "x", None]})
    assert not json_identical({"a": [1]}, {"a": [1.0]})
    assert not json_identical({"a": 1}, {"b": 1})
    assert not json_identical([1, 2], [1])


@pytest.mark.parametrize(
    "text",
    [
        "inputs.n < five",  # ordering needs a numeric literal
        "inputs.n > true",
        "inputs.n >= '3'",
        "inputs.a == inputs.b",  # no path-vs-path
        "inputs.a < tasks.x.output",
        "inputs.a and inputs.b",
        "inputs.a || inputs.b",
        "inputs.a + 1 == 2",
        "",
        "   ",
        "${{ }}",
        "not",
        "${{ inputs.a }} ${{ inputs.b }}",
        "inputs.n < 1e400",  # a literal out of range is no number to compare with
        "inputs.n == -1e999",
    ],
)
def test_rejected_condition_syntax(text: str) -> None:
    with pytest.raises(TemplateError):
        parse_condition(text)


@pytest.mark.parametrize(
    "text",
    [
        "inputs.a == 1 or inputs.b == 2",  # once: literal `1 or inputs.b == 2`, always false
        "inputs.a != 1 and inputs.b != 2",  # once: always true
        "${{ inputs.a == 1 && inputs.b == 2 }}",
        'inputs.a == "x" || inputs.b == "y"',
        "inputs.a == 'x' OR inputs.b == 'y'",
        "not inputs.a or inputs.b",
        "inputs.a or inputs.b == 2",
        "inputs.n < 2 and inputs.n > 0",
    ],
)
def test_and_or_are_refused_not_taken_into_a_literal(text: str) -> None:
    with pytest.raises(TemplateError, match="`and`, `or`, `&&` and `\\|\\|` are not supported"):
        parse_condition(text)


@pytest.mark.parametrize(
    ("text", "literal"),
    [
        ('inputs.a == "rock and roll"', "rock and roll"),  # JSON
        ("inputs.a == 'rock or roll'", "rock or roll"),  # one pair of quotes, stripped
        ('inputs.a == {"k": "x && y"}', {"k": "x && y"}),
        ('inputs.a == ["a || b"]', ["a || b"]),
        ("inputs.a != order", "order"),  # the words only as words
        ("inputs.a == android", "android"),
        ("inputs.and == 1", 1),
    ],
)
def test_and_or_inside_one_literal_stay_literal_text(text: str, literal: Any) -> None:
    assert parse_condition(text).literal == literal


def test_digit_segments_never_index_arrays() -> None:
    # Digits are legal segment characters, but only objects are traversed.
    with pytest.raises(TemplateError, match="undefined value"):
        evaluate("inputs.list.0 == 5", ctx(list=[5]))
    assert evaluate("inputs.map.0 == 5", ctx(map={"0": 5})) is True


def test_a_quoted_path_looking_literal_is_a_plain_string() -> None:
    assert evaluate('inputs.a == "inputs.b"', ctx(a="inputs.b")) is True


def test_check_condition_returns_the_reference() -> None:
    [ref] = check_condition("${{ tasks.pick.output.selected == go }}")
    assert ref.task_id == "pick"
    assert ref.path == "tasks.pick.output.selected"


@pytest.mark.parametrize("value", ["3", True, None, [3], {"n": 3}])
def test_ordering_needs_a_numeric_value_at_run_time(value: Any) -> None:
    with pytest.raises(TemplateError, match="not a number"):
        evaluate("inputs.v < 5", ctx(v=value))


def test_a_hand_built_ordering_condition_needs_a_numeric_literal() -> None:
    # ``parse_condition`` refuses such a condition; one built directly fails the same way
    # (a TemplateError) instead of Python's TypeError from comparing a number with text.
    ref = parse_condition("inputs.v < 5").reference
    with pytest.raises(TemplateError, match="needs a numeric literal"):
        evaluate(Condition("inputs.v < five", False, ref, "<", "five"), ctx(v=3))


def test_missing_path_is_an_error_not_false() -> None:
    with pytest.raises(TemplateError, match="undefined value"):
        evaluate("inputs.missing == 1", ctx())


def test_nan_and_infinity_are_not_numeric_literals() -> None:
    with pytest.raises(TemplateError):
        parse_condition("inputs.n < NaN")
    assert parse_condition("inputs.n == Infinity").literal == "Infinity"


def test_decision_records_expression_result_and_digest_of_what_was_read() -> None:
    context = ctx(x=3, unrelated="a")
    record = decision("${{ inputs.x >= 3 }}", context)
    assert record == {
        "expression": "${{ inputs.x >= 3 }}",
        "result": True,
        "contextDigest": v1_digest({"inputs.x": 3}),
    }
    assert record["contextDigest"].startswith("sha256:v1:")
    # The digest covers only the value read: unrelated context does not change it...
    context["inputs"]["unrelated"] = "b"
    assert decision("${{ inputs.x >= 3 }}", context)["contextDigest"] == record["contextDigest"]
    # ...but the read value does, even when the result stays the same.
    assert decision("${{ inputs.x >= 3 }}", ctx(x=4))["contextDigest"] != record["contextDigest"]


@given(st.integers(-50, 50), st.integers(-50, 50))
def test_numeric_comparisons_match_python(value: int, literal: int) -> None:
    context = ctx(v=value)
    assert evaluate(f"inputs.v < {literal}", context) is (value < literal)
    assert evaluate(f"inputs.v <= {literal}", context) is (value <= literal)
    assert evaluate(f"inputs.v > {literal}", context) is (value > literal)
    assert evaluate(f"inputs.v >= {literal}", context) is (value >= literal)
    assert evaluate(f"inputs.v == {literal}", context) is (value == literal)


@given(
    st.sampled_from(["inputs.v", "inputs.v == 1", "inputs.v != x", "inputs.v == null"]),
    st.none() | st.booleans() | st.integers(-2, 2) | st.text(max_size=3),
)
def test_not_negates(text: str, value: Any) -> None:
    context = ctx(v=value)
    assert evaluate("not " + text, context) is (not evaluate(text, context))


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("inputs.a.", "empty path segment (a leading, trailing or doubled `.`)"),
        ("inputs..a", "empty path segment"),
        ("inputs.l[0]", "bad path segment 'l[0]': indexing is not supported"),
        ("inputs.a b", "bad path segment 'a b': a segment holds letters, digits"),
    ],
)
def test_a_bad_path_segment_says_what_is_wrong_with_it(path: str, words: str) -> None:
    with pytest.raises(TemplateError) as info:
        parse_condition(path)
    assert f"unsupported expression `{path}`: {words}" in str(info.value)
