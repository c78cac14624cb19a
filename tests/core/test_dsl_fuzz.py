"""Fuzzing the loader: whatever the input, ``load_workflow`` returns a LoadedWorkflow whose data
is plain JSON, or raises ValidationError with well-formed diagnostics — never anything else.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_dsl_examples import EXAMPLES

from agentctl.core.dsl import LoadedWorkflow, load_workflow
from agentctl.errors import DIAGNOSTIC_CODES, ValidationError

FUZZ = settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Characters that matter to YAML's grammar, plus a few that must be refused.
YAML_CHARS = [*" :{}[],-\n\t'\"&*!|>#%@`?.~$\\", "\x00", "\x85", "é", "\ufeff", "<<"]
REPLACEMENTS: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    7,
    10**12,
    1.5,
    "3",
    "",
    "router",
    "action:put",
    "workflow:x",
    [],
    [1, "a"],
    {},
    {"env": "X"},
    {"file": "/x"},
    {"kind": "fake"},
    {"maxAttempts": 2},
]
_PARSED = {name: yaml.safe_load(source) for name, source in EXAMPLES.items()}
NEW_KEYS = ["zz", "kind", "with", "env", "uses", "needs", "route", "loop", "reasoning", "<<"]


def check_outcome(source: str | bytes) -> None:
    try:
        loaded = load_workflow(source, "fuzz.yaml")
    except ValidationError as exc:
        assert exc.diagnostics
        for diag in exc.diagnostics:
            assert diag.code in DIAGNOSTIC_CODES
            assert diag.message and diag.file == "fuzz.yaml"
            assert diag.line is None or diag.line >= 1
            assert diag.column is None or diag.column >= 1
        return
    assert isinstance(loaded, LoadedWorkflow)
    # Both the raw and the normalized data are plain, finite JSON.
    for value in (loaded.raw, loaded.document):
        assert json.loads(json.dumps(value, allow_nan=False)) == value
    assert loaded.locate("spec.tasks.0") is not None


@st.composite
def text_mutations(draw: st.DrawFn) -> str:
    chars = list(draw(st.sampled_from(sorted(EXAMPLES.values()))))
    for _ in range(draw(st.integers(1, 6))):
        where = draw(st.integers(0, len(chars)))
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        char = draw(st.sampled_from(YAML_CHARS) | st.characters())
        if op == "insert":
            chars.insert(where, char)
        elif where < len(chars):
            if op == "delete":
                del chars[where]
            else:
                chars[where] = char
    return "".join(chars)


def _mutate_tree(draw: st.DrawFn, doc: Any) -> None:
    parent: Any = None
    key: Any = None
    node = doc
    for _ in range(draw(st.integers(0, 7))):
        if isinstance(node, dict) and node:
            parent, key = node, draw(st.sampled_from(sorted(node)))
        elif isinstance(node, list) and node:
            parent, key = node, draw(st.integers(0, len(node) - 1))
        else:
            break
        node = parent[key]
    if parent is None:
        return
    op = draw(st.sampled_from(["replace", "delete", "add"]))
    # Copies: a later mutation may descend into the new value and must not touch REPLACEMENTS.
    new = copy.deepcopy(draw(st.sampled_from(REPLACEMENTS)))
    if op == "replace" or isinstance(parent, list):
        parent[key] = new
    elif op == "delete":
        del parent[key]
    else:
        parent[draw(st.sampled_from(NEW_KEYS))] = new


@st.composite
def tree_mutations(draw: st.DrawFn) -> str:
    # A fresh copy per example: mutations must never leak into the next one.
    doc = copy.deepcopy(_PARSED[draw(st.sampled_from(sorted(_PARSED)))])
    for _ in range(draw(st.integers(1, 4))):
        _mutate_tree(draw, doc)
    style = draw(st.sampled_from([None, True, False]))
    return yaml.dump(doc, Dumper=yaml.CSafeDumper, default_flow_style=style, sort_keys=False)


@FUZZ
@given(st.binary(max_size=256))
def test_binary_input_never_escapes_validation_error(source: bytes) -> None:
    check_outcome(source)


@FUZZ
@given(st.text(max_size=256))
def test_text_input_never_escapes_validation_error(source: str) -> None:
    check_outcome(source)


@FUZZ
@given(st.one_of(text_mutations(), tree_mutations()))
def test_mutated_documents_never_escape_validation_error(source: str) -> None:
    check_outcome(source)


@pytest.mark.parametrize("where", [0, -1])
def test_a_lone_surrogate_in_a_document_is_a_validation_error(where: int) -> None:
    """A str that cannot be UTF-8 encoded (a lone surrogate; found by the fuzz test): libyaml
    refuses to take it, and the exact parser reports it."""
    source = EXAMPLES["e1"]
    source = "\ud800" + source if where == 0 else source + "# \udfff\n"
    check_outcome(source)
    with pytest.raises(ValidationError):
        load_workflow(source, "fuzz.yaml")


def test_mutated_documents_do_not_all_fail() -> None:
    """The mutation strategy also reaches valid documents (the fuzz test is not vacuous)."""
    doc = yaml.safe_load(EXAMPLES["e3"])
    doc["spec"]["tasks"][0]["with"]["value"] = [1, "a"]
    check_outcome(yaml.safe_dump(doc, sort_keys=False))
    assert load_workflow(yaml.safe_dump(doc)).document["spec"]["tasks"][0]["with"]["value"] == [
        1,
        "a",
    ]
