"""User-facing wording of JSON Schema problems (the ``jsonschema`` package's errors, reworded).

The package's messages quote Python reprs (``'b' is a required property``); ours say what is
wrong in the workflow author's terms and are pinned by tests/core/test_jsonschema.py. Problems
of a schema itself arrive as metaschema errors; problems of a value against a schema as
validation errors. Either way an error of a keyword we do not reword keeps the package's text.

Invariant: pure functions of one error; nothing here imports the package (the caller does).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from agentctl.core.floattext import number_text, respell_json_floats
from agentctl.core.jsonvalue import JsonValue, as_object

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError as SchemaError

_ARTICLE = {
    "string": "a string",
    "boolean": "a boolean",
    "number": "a number",
    "integer": "an integer",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


def type_of(value: object) -> str:
    """The JSON type name of a Python JSON value (``integer`` for ints, ``number`` floats)."""
    names = {type(None): "null", bool: "boolean", int: "integer", float: "number", str: "string"}
    if type(value) in names:
        return names[type(value)]
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


def type_article(name: str) -> str:
    """A JSON type name as a message says it: ``array`` → ``an array``, ``null`` → ``null``."""
    return _ARTICLE.get(name, name)


# --- problems of a schema (metaschema errors) ---------------------------------------------


def schema_problem_text(error: SchemaError) -> str:
    """One metaschema error of a workflow's schema, in the author's terms."""
    rule: Mapping[str, JsonValue] = error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "anyOf" and error.absolute_path and error.absolute_path[-1] == "type":
        if isinstance(error.instance, str):
            return f"unknown type {error.instance!r}"
        return "must be a type name or a non-empty array of distinct type names"
    if rule.get("type") == "integer" and rule.get("minimum") == 0:
        return "must be a non-negative integer"
    if rule.get("type") == "array" and rule.get("minItems") == 1:
        return "must be a non-empty array of schemas"
    if error.validator == "format" and error.validator_value == "regex":
        return _regex_problem(str(error.instance))
    if error.validator == "uniqueItems":
        return "entries must be distinct"
    if error.validator == "type":
        return _type_rule_text(error.validator_value, rule)
    return str(error.message)


def _type_rule_text(expected: object, rule: Mapping[str, JsonValue]) -> str:
    if expected == ["object", "boolean"]:
        return "a schema must be an object or a boolean"
    if expected == "object" and "additionalProperties" in rule:
        return "must be an object of schemas"
    items = rule.get("items")
    if expected == "array" and isinstance(items, dict) and items.get("type") == "string":
        return "must be an array of strings"
    return "must be " + type_article(str(expected))


def _regex_problem(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"invalid regular expression: {exc}"
    return "invalid regular expression"


# --- problems of a value (validation errors) ----------------------------------------------


def problem_text(error: SchemaError) -> list[str]:
    """The problems one validation error stands for (``required`` and ``additionalProperties``
    may stand for several names; the caller drops repeats)."""
    keyword, value, instance = error.validator, error.validator_value, error.instance
    if keyword is None or (keyword == "not" and value == {}):  # the schema `false`
        return ["no value is allowed here"]
    if keyword == "required" and isinstance(instance, dict) and isinstance(value, list):
        return [f"missing required property {n!r}" for n in value if n not in instance]
    if keyword == "additionalProperties" and isinstance(instance, dict):
        extra = _extra_properties(instance, error.schema)
        return [f"property {n!r} is not allowed" for n in extra]
    if keyword == "type":
        expected = " or ".join(value) if isinstance(value, list) else str(value)
        return [f"expected {expected}, got {type_of(instance)}"]
    if keyword == "oneOf":
        return [_one_of_text(error)]
    text = _SIMPLE.get(str(keyword))
    if text is None:
        return [str(error.message)]
    # Only the number keywords show the instance: never a repr of a large array or object.
    shown = _shown(instance) if "{i}" in text else ""
    return [text.format(v=_shown(value), i=shown, j=_json(value))]


_SIMPLE = {
    "enum": "value is not one of the allowed values",
    "const": "value must equal the constant {j}",
    "minLength": "string shorter than {v} characters",
    "maxLength": "string longer than {v} characters",
    "pattern": "string does not match pattern {v}",
    "minimum": "{i} must be >= {v}",
    "maximum": "{i} must be <= {v}",
    "exclusiveMinimum": "{i} must be > {v}",
    "exclusiveMaximum": "{i} must be < {v}",
    "multipleOf": "{i} is not a multiple of {v}",
    "minItems": "fewer than {v} items",
    "maxItems": "more than {v} items",
    "uniqueItems": "items are not unique",
    "minProperties": "fewer than {v} properties",
    "maxProperties": "more than {v} properties",
    "anyOf": "value matches none of the anyOf schemas",
    "not": "value matches the schema under `not`",
}


def _one_of_text(error: SchemaError) -> str:
    # The package gives the failed branches as context only when no branch matched.
    if error.context:
        return "value matches none of the oneOf schemas"
    return "value matches more than one of the oneOf schemas, not exactly 1"


def _extra_properties(instance: Mapping[str, object], schema: object) -> list[str]:
    """Names ``additionalProperties`` applies to: in neither ``properties`` nor
    ``patternProperties``."""
    rule: Mapping[str, JsonValue] = schema if isinstance(schema, dict) else {}
    named = as_object(rule.get("properties") or {})
    patterns = list(as_object(rule.get("patternProperties") or {}))
    return [n for n in instance if n not in named and not any(re.search(p, n) for p in patterns)]


def _json(value: object) -> str:
    return respell_json_floats(json.dumps(value, ensure_ascii=False, sort_keys=True))


def _shown(value: object) -> str:
    """A keyword's value or an instance in a message: a number as the workflow's JSON writes
    it (``0.00001``, not ``1e-05``), anything else as its ``repr`` (``'b'``)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return number_text(value)
    return repr(value)
