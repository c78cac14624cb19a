"""JSON Schema Draft 2020-12 through the package, with our strictness and our wording."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentctl.core.jsonschema import check_schema, is_valid, type_of, validate
from agentctl.errors import ValidationError

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


# --- check_schema -------------------------------------------------------------------------


def test_a_rich_well_formed_schema_has_no_problems() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "t",
        "description": "d",
        "$comment": "c",
        "type": ["object", "null"],
        "properties": {
            "a": {"type": "string", "minLength": 1, "maxLength": 3, "pattern": "^a", "format": "x"},
            "b": {
                "type": "array",
                "items": {"type": "integer"},
                "minItems": 0,
                "uniqueItems": True,
            },
            "c": {"prefixItems": [{"const": 1}, True], "items": False, "maxItems": 2},
            "d": {"enum": [1, "x", None], "default": 1, "examples": [1]},
            "e": {"anyOf": [{"minimum": 0}], "oneOf": [{"maximum": 5.5}], "allOf": [True]},
            "f": {"not": {"exclusiveMinimum": 1, "exclusiveMaximum": 2}},
        },
        "required": ["a"],
        "additionalProperties": {"type": "number"},
        "minProperties": 1,
        "maxProperties": 9,
    }
    assert check_schema(schema) == []
    assert check_schema({"$defs": {"n": {"type": "integer"}}, "items": {"$ref": "#/$defs/n"}}) == []
    assert check_schema({"$id": "https://x.test/s", "properties": {"a": {"$ref": "#"}}}) == []
    assert check_schema({"$schema": "https://json-schema.org/draft/2020-12/schema#"}) == []
    assert check_schema(True) == []
    assert check_schema(False) == []


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ({"$ref": "#/defs/x"}, "/$ref: `$ref` '#/defs/x' does not resolve inside this schema"),
        (
            {"$ref": "https://example.com/s.json"},
            "/$ref: `$ref` 'https://example.com/s.json' points outside",
        ),
        ({"properties": {"a": {"$ref": "other.json#/x"}}}, "/properties/a/$ref"),
        ({"items": {"$dynamicRef": "http://h/x"}}, "/items/$dynamicRef: `$dynamicRef`"),
        ({"$defs": {"a": {"tpye": "string"}}}, "/$defs/a/tpye: unknown schema keyword `tpye`"),
        ({"if": {"minimum": 1}, "then": {"maxLenght": 1}}, "/then/maxLenght: unknown schema"),
        ({"definitions": {}}, "`definitions` is not a Draft 2020-12 keyword; use `$defs`"),
        ({"$schema": "http://json-schema.org/draft-07/schema#"}, "only JSON Schema Draft 2020-12"),
        ({"typo": 1}, "/typo: unknown schema keyword `typo`"),
        ({"type": "float"}, "unknown type 'float'"),
        ({"type": []}, "non-empty array of distinct type names"),
        ({"type": ["string", "string"]}, "distinct type names"),
        ({"properties": []}, "must be an object of schemas"),
        ({"properties": {"a/b": 3}}, "/properties/a~1b: a schema must be an object"),
        ({"required": "a"}, "must be an array of strings"),
        ({"required": ["a", "a"]}, "entries must be distinct"),
        ({"additionalProperties": "no"}, "a schema must be an object or a boolean"),
        ({"items": [{"type": "string"}]}, "a schema must be an object or a boolean"),
        ({"prefixItems": []}, "non-empty array of schemas"),
        ({"anyOf": {}}, "non-empty array of schemas"),
        ({"enum": 3}, "/enum: must be an array"),
        ({"multipleOf": 0}, "/multipleOf"),
        ({"minimum": "1"}, "must be a number"),
        ({"maximum": True}, "must be a number"),
        ({"minLength": -1}, "non-negative integer"),
        ({"maxItems": 1.5}, "non-negative integer"),
        ({"minProperties": False}, "non-negative integer"),
        ({"pattern": "("}, "invalid regular expression"),
        ({"uniqueItems": 1}, "must be a boolean"),
        ({"description": 3}, "must be a string"),
        ({"examples": 3}, "must be an array"),
        ("object", "a schema must be an object or a boolean"),
    ],
)
def test_malformed_schemas_are_reported(schema: Any, fragment: str) -> None:
    problems = check_schema(schema)
    assert problems, schema
    assert any(fragment in p for p in problems), problems


def test_validate_refuses_a_malformed_schema() -> None:
    with pytest.raises(ValidationError, match="invalid JSON Schema"):
        validate({}, {"type": "object", "requird": ["a"]})


# --- validate -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("instance", "type_name", "ok"),
    [
        (1, "integer", True),
        (1.0, "integer", True),  # JSON Schema: an integral number is an integer
        (1.5, "integer", False),
        (True, "integer", False),  # booleans are never numbers
        (True, "number", False),
        (1, "number", True),
        (2.5, "number", True),
        (None, "null", True),
        (0, "null", False),
        (False, "boolean", True),
        (0, "boolean", False),
        ("x", "string", True),
        ([], "array", True),
        ({}, "object", True),
        ([], "object", False),
    ],
)
def test_type(instance: Any, type_name: str, ok: bool) -> None:
    assert is_valid(instance, {"type": type_name}) is ok


def test_type_list() -> None:
    assert is_valid(None, {"type": ["string", "null"]})
    assert validate(3, {"type": ["string", "null"]}) == ["/: expected string or null, got integer"]


def test_object_keywords_and_paths() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "n/m": {"type": "object", "properties": {"x": {"type": "integer"}}},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    errors = validate({"a": 1, "n/m": {"x": "no"}, "zz": 0}, schema)
    assert sorted(errors) == [
        "/: missing required property 'b'",
        "/: property 'zz' is not allowed",
        "/a: expected string, got integer",
        "/n~1m/x: expected integer, got string",
    ]


def test_additional_properties_schema_and_property_counts() -> None:
    schema = {"additionalProperties": {"type": "integer"}, "minProperties": 1, "maxProperties": 2}
    assert is_valid({"a": 1}, schema)
    assert validate({"a": "x"}, schema) == ["/a: expected integer, got string"]
    assert validate({}, schema) == ["/: fewer than 1 properties"]
    assert validate({"a": 1, "b": 2, "c": 3}, schema) == ["/: more than 2 properties"]


def test_array_keywords() -> None:
    schema = {
        "prefixItems": [{"type": "string"}],
        "items": {"type": "integer"},
        "minItems": 1,
        "maxItems": 3,
    }
    assert is_valid(["a", 1, 2], schema)
    assert validate(["a", "b"], schema) == ["/1: expected integer, got string"]
    assert validate([], schema) == ["/: fewer than 1 items"]
    assert validate(["a", 1, 2, 3], schema) == ["/: more than 3 items"]
    assert validate([1], {"items": False}) == ["/0: no value is allowed here"]
    assert validate([1, 2], {"prefixItems": [True], "items": False}) == [
        "/1: no value is allowed here"
    ]
    assert validate([1], {"items": {"not": True}}) == ["/0: value matches the schema under `not`"]
    assert validate({"a": 1}, {"properties": {"a": False}}) == ["/a: no value is allowed here"]
    assert is_valid([], {"items": False})


def test_unique_items_uses_json_equality() -> None:
    schema = {"uniqueItems": True}
    assert is_valid([1, True, "1", [1], {"a": 1}], schema)
    assert not is_valid([1, 1.0], schema)
    assert not is_valid([{"a": [1]}, {"a": [1]}], schema)
    assert is_valid([1, 1], {"uniqueItems": False})


def test_string_keywords() -> None:
    schema = {"minLength": 2, "maxLength": 3, "pattern": "b"}
    assert is_valid("abc", schema)  # search semantics, not a full match
    assert validate("a", schema) == [
        "/: string shorter than 2 characters",
        "/: string does not match pattern 'b'",
    ]
    assert not is_valid("abbb", schema)
    assert is_valid("éé", {"maxLength": 2})  # code points, not bytes


def test_number_bounds() -> None:
    assert is_valid(5, {"minimum": 5, "maximum": 5})
    assert validate(4, {"minimum": 5}) == ["/: 4 must be >= 5"]
    assert validate(6.5, {"maximum": 6}) == ["/: 6.5 must be <= 6"]
    assert not is_valid(1, {"exclusiveMinimum": 1})
    assert not is_valid(2, {"exclusiveMaximum": 2})
    assert is_valid(1.5, {"exclusiveMinimum": 1, "exclusiveMaximum": 2})
    assert is_valid("not a number", {"minimum": 100})  # bounds apply to numbers only
    # Numbers in messages are spelled as the workflow's JSON writes them, not as repr.
    assert validate(0.00001, {"minimum": 0.0001}) == ["/: 0.00001 must be >= 0.0001"]
    assert validate(1e16, {"exclusiveMaximum": 1e16}) == ["/: 1e16 must be < 1e16"]
    assert validate(1, {"const": 1e-7}) == ["/: value must equal the constant 1e-7"]


def test_enum_and_const_keep_booleans_apart_from_numbers() -> None:
    assert not is_valid(1, {"enum": [True, "1"]})
    assert not is_valid(True, {"const": 1})
    assert is_valid(1.0, {"const": 1})
    assert is_valid({"a": [None]}, {"enum": [{"a": [None]}]})
    assert validate("c", {"enum": ["a", "b"]}) == ["/: value is not one of the allowed values"]


def test_combinators() -> None:
    any_of = {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert is_valid(1, any_of)
    assert validate(None, any_of) == ["/: value matches none of the anyOf schemas"]
    one_of = {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]}
    assert is_valid(-1, one_of)
    assert validate(3, one_of) == [
        "/: value matches more than one of the oneOf schemas, not exactly 1"
    ]
    assert validate("x", one_of) == ["/: value matches none of the oneOf schemas"]
    all_of = {"allOf": [{"type": "integer"}, {"minimum": 2}]}
    assert validate(1, all_of) == ["/: 1 must be >= 2"]
    assert validate("x", {"not": {"type": "string"}}) == ["/: value matches the schema under `not`"]


def test_annotations_do_not_constrain() -> None:
    schema = {"format": "email", "default": 3, "title": "t", "examples": ["x"]}
    assert is_valid("not an email", schema)


def test_type_of_and_json_equality() -> None:
    samples: tuple[Any, ...] = (None, True, 1, 1.5, "", [], {})
    assert [type_of(v) for v in samples] == [
        "null",
        "boolean",
        "integer",
        "number",
        "string",
        "array",
        "object",
    ]
    assert is_valid(1, {"const": 1.0})
    assert not is_valid(True, {"enum": [1]})
    assert not is_valid(False, {"const": 0})
    assert not is_valid("1", {"const": 1})


def test_draft_2020_12_keywords_beyond_the_old_subset() -> None:
    schema = {
        "$defs": {"pos": {"type": "integer", "minimum": 1}},
        "type": "object",
        "properties": {"n": {"$ref": "#/$defs/pos"}, "tags": {"contains": {"const": "x"}}},
        "patternProperties": {"^x-": {"type": "string"}},
        "additionalProperties": False,
        "dependentRequired": {"n": ["tags"]},
    }
    assert is_valid({"n": 2, "tags": ["x"], "x-note": "ok"}, schema)
    assert validate({"n": 0, "tags": ["x"]}, schema) == ["/n: 0 must be >= 1"]
    assert validate({"x-note": 1}, schema) == ["/x-note: expected string, got integer"]
    assert validate({"y": 1}, schema) == ["/: property 'y' is not allowed"]
    assert not is_valid({"n": 1}, schema)  # dependentRequired: n needs tags
    assert not is_valid({"tags": ["y"]}, schema)  # contains
    assert validate(3, {"multipleOf": 2}) == ["/: 3 is not a multiple of 2"]


def test_a_recursive_local_reference_validates_nested_values() -> None:
    tree = {
        "type": "object",
        "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}},
        "required": ["kids"],
    }
    assert is_valid({"kids": [{"kids": []}]}, tree)
    assert validate({"kids": [{"kids": [{}]}]}, tree) == [
        "/kids/0/kids/0: missing required property 'kids'"
    ]


@given(JSON)
def test_empty_and_true_schemas_accept_everything(value: Any) -> None:
    assert validate(value, {}) == []
    assert validate(value, True) == []
    assert validate(value, False) == ["/: no value is allowed here"]


@given(JSON)
def test_const_and_enum_accept_the_value_itself(value: Any) -> None:
    assert is_valid(value, {"const": value})
    assert is_valid(value, {"enum": ["other", value]})
    assert is_valid(value, {"type": type_of(value)})


@given(JSON, st.sampled_from(["null", "boolean", "integer", "number", "string", "array", "object"]))
def test_the_type_only_shortcut_agrees_with_the_package(value: Any, name: str) -> None:
    # {"type": ...} alone is checked without the package; an annotation forces the package.
    assert validate(value, {"type": name}) == validate(value, {"type": name, "title": "t"})
    pair = [name, "null"] if name != "null" else ["null", "string"]
    assert validate(value, {"type": pair}) == validate(value, {"type": pair, "title": "t"})
