"""Diagnostics a user can act on: plain words for YAML mistakes people often make and for
numbers out of range or empty lists, never PyYAML's or pydantic's internal phrasing."""

from __future__ import annotations

import pytest
from test_dsl_errors import MINIMAL, check, only, position


def test_a_second_document_is_named_as_such_with_a_way_out() -> None:
    source = MINIMAL + "---\n" + MINIMAL
    diag = only(source)
    check(diag, "yaml_syntax", None, position(source, "---"))
    assert "more than one YAML document" in diag.message and "but found" not in diag.message
    assert diag.help and "---" in diag.help


def test_a_tab_in_indentation_says_to_indent_with_spaces() -> None:
    source = MINIMAL.replace("      uses:", "\t  uses:")
    diag = only(source)
    check(diag, "yaml_syntax", None, position(source, "\t"))
    assert diag.help and "spaces" in diag.help


@pytest.mark.parametrize("source", ["", "\n", "# nothing\n", "---\n", "--- # nothing\n\n"])
def test_a_document_with_no_content_is_empty_wherever_its_marker_stands(source: str) -> None:
    diag = only(source)
    check(diag, "yaml_syntax", None, (1, 1))
    assert "empty" in diag.message


@pytest.mark.parametrize(
    ("source", "got"), [("null\n", "got null"), ("- a\n", "got a list"), ("'x'\n", "string")]
)
def test_a_document_that_is_not_a_mapping_says_what_it_is(source: str, got: str) -> None:
    diag = only(source)
    check(diag, "schema_violation", None, (1, 1))
    assert "must be a mapping" in diag.message and got in diag.message


@pytest.mark.parametrize(
    ("old", "new", "path", "needle", "words"),
    [
        (
            "      uses:",
            "      retry: { maxAttempts: 0 }\n      uses:",
            "spec.tasks.0.retry.maxAttempts",
            "0 }",
            "must be at least 1, got the number 0",
        ),
        (
            "      uses:",
            "      timeoutSeconds: 86401\n      uses:",
            "spec.tasks.0.timeoutSeconds",
            "86401",
            "must be at most 86400, got the number 86401",
        ),
        ("name: m", 'name: ""', "metadata.name", '""', "must not be empty"),
        (
            "  tasks:\n    - id: a\n      uses: action:x\n",
            "  tasks: []\n",
            "spec.tasks",
            "[]",
            "must hold at least 1 item, got none",
        ),
    ],
)
def test_ranges_and_sizes_are_said_plainly(
    old: str, new: str, path: str, needle: str, words: str
) -> None:
    source = MINIMAL.replace(old, new, 1)
    diag = only(source)
    check(diag, "schema_violation", path, position(source, needle))
    assert diag.message == f"`{path}` {words}"


def test_a_port_out_of_range_is_located_at_the_port_itself() -> None:
    source = MINIMAL.replace(
        "spec:\n", "spec:\n  policy: { network: { allowedPorts: [443, 0] } }\n"
    )
    diag = only(source)
    check(diag, "schema_violation", "spec.policy.network.allowedPorts.1", position(source, "0]"))


def test_a_bad_matrix_axis_name_points_at_that_axis() -> None:
    source = MINIMAL.replace(
        "      uses:", "      matrix: { axes: { os: [l], a-b: [1] } }\n      uses:"
    )
    diag = only(source)
    check(diag, "schema_violation", "spec.tasks.0.matrix.axes.a-b", position(source, "a-b"))
    assert diag.help


def test_a_template_where_a_literal_list_belongs_says_it_is_not_expanded() -> None:
    source = MINIMAL.replace(
        "      uses:", '      foreach: { items: "${{ inputs.l }}" }\n      uses:'
    )
    diag = only(source)
    check(diag, "schema_violation", "spec.tasks.0.foreach.items", position(source, '"${{'))
    assert diag.help == "write the value itself: a template is not expanded here"


def test_a_template_where_a_number_belongs_is_not_told_to_drop_its_quotes() -> None:
    source = MINIMAL.replace("      uses:", '      timeoutSeconds: "${{ inputs.t }}"\n      uses:')
    diag = only(source)
    check(diag, "schema_violation", "spec.tasks.0.timeoutSeconds", position(source, '"${{'))
    assert diag.help == "write the value itself: a template is not expanded here"
