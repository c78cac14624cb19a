"""Templates: syntax, references, exactness and rendering (spec/dsl.md §6.1–§6.2)."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentctl.core.templates import (
    Reference,
    TemplateError,
    find_references,
    is_exact_expression,
    parse_template,
    referenced_task_ids,
    render,
)
from agentctl.errors import RunFailedError

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def ctx(**inputs: Any) -> dict[str, Any]:
    return {
        "inputs": inputs,
        "vars": {"env": "dev", "matrix": {"os": "linux"}},
        "memory": {"left": "L", "none": None},
        "tasks": {"stash": {"output": {"output": {"n": 3, "meta": {"ok": True}}}}},
    }


@pytest.mark.parametrize(
    "text",
    [
        "${{ inputs.x",  # unclosed
        "a ${{ }} b",  # empty
        "${{}}",
        "${{ secrets.x }}",  # unknown root
        "${{ inputs }}",  # root without a key
        "${{ memory }}",
        "${{ tasks.stash }}",  # task read without `.output`
        "${{ tasks.stash.result }}",
        "${{ inputs.items[0] }}",  # no indexing
        "${{ inputs.a..b }}",
        "${{ inputs.x + 1 }}",  # no arithmetic
        "${{ len(inputs.x) }}",  # no functions
        "${{ inputs.a and inputs.b }}",  # no and/or
        "x=${{ inputs.x == 1 }}",  # conditions only as the whole value
    ],
)
def test_malformed_templates_are_rejected(text: str) -> None:
    with pytest.raises(TemplateError):
        parse_template(text)


def test_template_error_is_a_run_failure() -> None:
    assert issubclass(TemplateError, RunFailedError)


def test_find_references_walks_values_not_keys() -> None:
    value = {
        "${{ inputs.ignored }}": "x",
        "a": ["${{ inputs.count }}", {"b": "n=${{ tasks.stash.output.output.n }} ${{ vars.env }}"}],
        "c": "${{ not memory.left == 'L' }}",
        "d": 7,
    }
    refs = find_references(value)
    assert [r.path for r in refs] == [
        "inputs.count",
        "tasks.stash.output.output.n",
        "vars.env",
        "memory.left",
    ]
    task_ref = refs[1]
    assert task_ref == Reference(
        "tasks", ("stash", "output", "output", "n"), "tasks.stash.output.output.n"
    )
    assert task_ref.task_id == "stash"
    assert refs[0].task_id is None
    assert refs[3].expression == "not memory.left == 'L'"


def test_referenced_task_ids_are_distinct_in_first_seen_order() -> None:
    value = ["${{ tasks.b.output }}", "${{ tasks.a.output.x }}-${{ tasks.b.output.y }}"]
    assert referenced_task_ids(value) == ["b", "a"]


def test_find_references_raises_on_malformed_text() -> None:
    with pytest.raises(TemplateError):
        find_references({"a": ["${{ inputs.x"]})


@pytest.mark.parametrize(
    ("text", "exact"),
    [
        ("${{ inputs.x }}", True),
        ("${{inputs.x}}", True),
        ("${{ inputs.x == 1 }}", True),
        (" ${{ inputs.x }}", False),
        ("${{ inputs.x }} ", False),
        ("${{ inputs.x }}${{ inputs.y }}", False),
        ("plain", False),
        ("${{ nope.x }}", False),
    ],
)
def test_is_exact_expression(text: str, exact: bool) -> None:
    assert is_exact_expression(text) is exact


def test_exact_expression_renders_the_raw_json_value() -> None:
    context = ctx(count=3, meta={"ok": True}, items=[1, "a"], nothing=None)
    assert render("${{ inputs.count }}", context) == 3
    assert render("${{ inputs.meta }}", context) == {"ok": True}
    assert render("${{ inputs.items }}", context) == [1, "a"]
    assert render("${{ inputs.nothing }}", context) is None
    assert render("${{ tasks.stash.output }}", context) == {
        "output": {"n": 3, "meta": {"ok": True}}
    }
    assert render("${{ vars.matrix.os }}", context) == "linux"


def test_exact_render_returns_a_copy_of_the_context_value() -> None:
    context = ctx(meta={"ok": True})
    rendered = render("${{ inputs.meta }}", context)
    rendered["ok"] = False
    assert context["inputs"]["meta"] == {"ok": True}


def test_text_interpolation_formats_scalars_as_json() -> None:
    context = ctx(n=3, f=1.5, t=True, f2=False, z=None, s="str")
    text = "|".join("${{ inputs." + k + " }}" for k in ("n", "f", "t", "f2", "z", "s"))
    assert render(text, context) == "3|1.5|true|false|null|str"
    assert render("n=${{ inputs.n }}", context) == "n=3"


def test_interpolated_floats_are_spelled_as_the_original_spells_them() -> None:
    context = ctx(lr=0.00001, big=1.0e16, tiny=-1.5e-7, huge=1e15)
    text = "--lr=${{ inputs.lr }} n=${{ inputs.big }} t=${{ inputs.tiny }} h=${{ inputs.huge }}"
    assert render(text, context) == "--lr=0.00001 n=1e16 t=-1.5e-7 h=1000000000000000.0"


@pytest.mark.parametrize("value", [{"a": 1}, [1, 2], []])
def test_interpolating_an_object_or_array_is_an_error(value: Any) -> None:
    with pytest.raises(TemplateError, match="embedded object or array"):
        render("v=${{ inputs.v }}", ctx(v=value))


def test_exact_conditions_render_booleans() -> None:
    context = ctx(count=3)
    assert render("${{ tasks.stash.output.output.meta.ok == true }}", context) is True
    assert render("${{ inputs.count < 2 }}", context) is False
    assert render("${{ not inputs.count }}", context) is False
    assert render("${{ not memory.none }}", context) is True


@pytest.mark.parametrize(
    "text",
    [
        "${{ inputs.missing }}",
        "${{ tasks.other.output }}",
        "${{ inputs.s.deeper }}",
        "${{ memory.x }}",
    ],
)
def test_missing_paths_and_non_object_steps_are_errors(text: str) -> None:
    with pytest.raises(TemplateError, match="undefined value"):
        render(text, ctx(s="scalar"))


def test_missing_root_in_context_is_an_error() -> None:
    with pytest.raises(TemplateError):
        render("${{ inputs.a }}", {"vars": {}})


def test_render_walks_values_recursively_and_leaves_keys_alone() -> None:
    value = {
        "${{ inputs.k }}": ["${{ inputs.k }}", {"deep": "${{ inputs.k }}!"}],
        "n": 1,
        "b": None,
    }
    assert render(value, ctx(k="v")) == {
        "${{ inputs.k }}": ["v", {"deep": "v!"}],
        "n": 1,
        "b": None,
    }


def test_rendered_text_is_never_expanded_again() -> None:
    context = ctx(a="${{ inputs.b }}", b="secret")
    assert render("${{ inputs.a }}", context) == "${{ inputs.b }}"
    assert render("x ${{ inputs.a }}", context) == "x ${{ inputs.b }}"


def test_e1_dataflow_example() -> None:
    with_ = {
        "n": "${{ inputs.count }}",
        "label": "n=${{ inputs.count }}",
        "meta": "${{ inputs.meta }}",
    }
    assert render(with_, ctx(count=3, meta={"ok": True})) == {
        "n": 3,
        "label": "n=3",
        "meta": {"ok": True},
    }


@given(JSON)
def test_exact_expression_preserves_any_json_value(value: Any) -> None:
    assert render("${{ inputs.value }}", ctx(value=value)) == value


@given(st.text().filter(lambda t: "${{" not in t))
def test_text_without_expressions_is_unchanged(text: str) -> None:
    assert render(text, ctx()) == text


@given(st.text(alphabet="${} .inputsvarmemorytaskoutput_-x=<>!01'\"", max_size=40))
def test_arbitrary_text_renders_or_raises_template_error_only(text: str) -> None:
    with contextlib.suppress(TemplateError):
        render(text, ctx(x=1))
