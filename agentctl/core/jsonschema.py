"""A small, strict JSON Schema subset: schema well-formedness and instance validation.

We may not depend on the ``jsonschema`` package, and workflow schemas (output contracts, tool
input/output schemas, sub-workflow boundaries, reconciliation results) only need a subset.

Invariants:
- ``check_schema`` accepts only the keywords listed in ``KEYWORDS``; ``$ref`` and every unknown
  keyword are reported, never silently ignored. Annotations (description, title, default,
  examples, $schema, $comment, format) are accepted and have no effect on validation.
- ``validate`` refuses (``ValidationError``) a schema that ``check_schema`` rejects, so a typo
  in a schema can never make validation vacuously pass.
- Booleans are never numbers: ``true`` is not an ``integer``; an integral float such as ``1.0``
  *is* an ``integer``, as JSON Schema defines it.
- ``enum``/``const``/``uniqueItems`` compare by JSON equality with booleans kept apart from
  numbers (``true != 1``) and numbers compared by value (``1 == 1.0``, JSON Schema's rule).
- Messages read ``<json-pointer>: <problem>``; the root is ``/``.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from typing import Any

from agentctl.errors import ValidationError

TYPES = frozenset({"null", "boolean", "integer", "number", "string", "array", "object"})
ANNOTATIONS = frozenset(
    {"description", "title", "default", "examples", "$schema", "$comment", "format"}
)
_SCHEMA_MAPS = frozenset({"properties"})
_SCHEMA_ONE = frozenset({"additionalProperties", "items", "not"})
_SCHEMA_LISTS = frozenset({"prefixItems", "anyOf", "oneOf", "allOf"})
_NUMBERS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_COUNTS = frozenset(
    {"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"}
)
KEYWORDS = (
    ANNOTATIONS
    | _SCHEMA_MAPS
    | _SCHEMA_ONE
    | _SCHEMA_LISTS
    | _NUMBERS
    | _COUNTS
    | {"type", "required", "enum", "const", "pattern", "uniqueItems"}
)


def _ptr(base: str, *parts: str | int) -> str:
    escaped = (str(p).replace("~", "~0").replace("/", "~1") for p in parts)
    return base.rstrip("/") + "".join("/" + p for p in escaped) or "/"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def type_of(value: Any) -> str:
    """The JSON type name of a Python JSON value (``integer`` for ints, ``number`` floats)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def json_equal(left: Any, right: Any) -> bool:
    """JSON Schema equality: booleans apart from numbers, numbers by value, deep otherwise."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if _is_number(left) and _is_number(right):
        return bool(left == right)
    if type(left) is not type(right):
        return False
    if isinstance(left, list):
        return len(left) == len(right) and all(map(json_equal, left, right))
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(json_equal(v, right[k]) for k, v in left.items())
    return bool(left == right)


# --- schema well-formedness ---------------------------------------------------------------


def check_schema(schema: Any, pointer: str = "/") -> list[str]:
    """Every well-formedness problem of ``schema``; an empty list means it is usable."""
    if isinstance(schema, bool):
        return []
    if not isinstance(schema, dict):
        return [f"{pointer}: a schema must be an object or a boolean"]
    errors: list[str] = []
    for key, value in schema.items():
        here = _ptr(pointer, key)
        if key == "$ref":
            errors.append(f"{here}: `$ref` is not supported; inline the referenced schema")
        elif key not in KEYWORDS:
            errors.append(f"{here}: unknown schema keyword `{key}`")
        else:
            errors.extend(_check_keyword(key, value, here))
    return errors


def _check_keyword(key: str, value: Any, here: str) -> list[str]:
    if key in _SCHEMA_ONE:
        return check_schema(value, here)
    if key in _SCHEMA_MAPS:
        if not isinstance(value, dict):
            return [f"{here}: must be an object of schemas"]
        return [e for name, sub in value.items() for e in check_schema(sub, _ptr(here, name))]
    if key in _SCHEMA_LISTS:
        if not isinstance(value, list) or not value:
            return [f"{here}: must be a non-empty array of schemas"]
        return [e for i, sub in enumerate(value) for e in check_schema(sub, _ptr(here, i))]
    if key in _NUMBERS and not _is_number(value):
        return [f"{here}: must be a number"]
    if key in _COUNTS and not _is_count(value):
        return [f"{here}: must be a non-negative integer"]
    checker = _SIMPLE_CHECKS.get(key)
    return checker(value, here) if checker else []


def _check_type(value: Any, here: str) -> list[str]:
    names = value if isinstance(value, list) else [value]
    if isinstance(value, list) and (not value or len(set(map(str, value))) != len(value)):
        return [f"{here}: must be a type name or a non-empty array of distinct type names"]
    bad = [n for n in names if not isinstance(n, str) or n not in TYPES]
    return [f"{here}: unknown type {n!r}" for n in bad]


def _check_required(value: Any, here: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return [f"{here}: must be an array of strings"]
    if len(set(value)) != len(value):
        return [f"{here}: names must be distinct"]
    return []


def _check_pattern(value: Any, here: str) -> list[str]:
    if not isinstance(value, str):
        return [f"{here}: must be a string"]
    try:
        re.compile(value)
    except re.error as exc:
        return [f"{here}: invalid regular expression: {exc}"]
    return []


def _check_enum(value: Any, here: str) -> list[str]:
    return [] if isinstance(value, list) and value else [f"{here}: must be a non-empty array"]


def _check_string(value: Any, here: str) -> list[str]:
    return [] if isinstance(value, str) else [f"{here}: must be a string"]


def _check_bool(value: Any, here: str) -> list[str]:
    return [] if isinstance(value, bool) else [f"{here}: must be a boolean"]


def _check_examples(value: Any, here: str) -> list[str]:
    return [] if isinstance(value, list) else [f"{here}: must be an array"]


_SIMPLE_CHECKS: dict[str, Callable[[Any, str], list[str]]] = {
    "type": _check_type,
    "required": _check_required,
    "pattern": _check_pattern,
    "enum": _check_enum,
    "uniqueItems": _check_bool,
    "description": _check_string,
    "title": _check_string,
    "$schema": _check_string,
    "$comment": _check_string,
    "format": _check_string,
    "examples": _check_examples,
}


# --- instance validation ------------------------------------------------------------------


def validate(instance: Any, schema: Any) -> list[str]:
    """Every way ``instance`` violates ``schema``; empty when valid.

    Raises ``ValidationError`` when the schema itself is malformed.
    """
    problems = check_schema(schema)
    if problems:
        raise ValidationError("invalid JSON Schema: " + "; ".join(problems))
    errors: list[str] = []
    _validate(instance, schema, "/", errors)
    return errors


def is_valid(instance: Any, schema: Any) -> bool:
    return not validate(instance, schema)


def _validate(instance: Any, schema: Any, path: str, errors: list[str]) -> None:
    if schema is True:
        return
    if schema is False:
        errors.append(f"{path}: no value is allowed here")
        return
    if "type" in schema and not _type_matches(instance, schema["type"]):
        errors.append(f"{path}: expected {_type_text(schema['type'])}, got {type_of(instance)}")
        return  # later keywords would only repeat the type mismatch
    _validate_values(instance, schema, path, errors)
    if isinstance(instance, str):
        _validate_string(instance, schema, path, errors)
    elif _is_number(instance):
        _validate_number(instance, schema, path, errors)
    elif isinstance(instance, list):
        _validate_array(instance, schema, path, errors)
    elif isinstance(instance, dict):
        _validate_object(instance, schema, path, errors)
    _validate_combinators(instance, schema, path, errors)


def _type_matches(instance: Any, expected: str | list[str]) -> bool:
    names = expected if isinstance(expected, list) else [expected]
    actual = type_of(instance)
    for name in names:
        if name == actual or (name == "number" and actual == "integer"):
            return True
        if name == "integer" and isinstance(instance, float) and instance.is_integer():
            return True
    return False


def _type_text(expected: str | list[str]) -> str:
    return " or ".join(expected) if isinstance(expected, list) else expected


def _validate_values(instance: Any, schema: dict[str, Any], path: str, errors: list[str]) -> None:
    if "enum" in schema and not any(json_equal(instance, v) for v in schema["enum"]):
        errors.append(f"{path}: value is not one of the allowed values")
    if "const" in schema and not json_equal(instance, schema["const"]):
        errors.append(f"{path}: value must equal the constant {schema['const']!r}")


def _validate_string(instance: str, schema: dict[str, Any], path: str, errors: list[str]) -> None:
    length = len(instance)
    if "minLength" in schema and length < schema["minLength"]:
        errors.append(f"{path}: string shorter than {schema['minLength']} characters")
    if "maxLength" in schema and length > schema["maxLength"]:
        errors.append(f"{path}: string longer than {schema['maxLength']} characters")
    if "pattern" in schema and re.search(schema["pattern"], instance) is None:
        errors.append(f"{path}: string does not match pattern {schema['pattern']!r}")


_BOUNDS: tuple[tuple[str, Callable[[Any, Any], Any], str], ...] = (
    ("minimum", operator.ge, "must be >="),
    ("maximum", operator.le, "must be <="),
    ("exclusiveMinimum", operator.gt, "must be >"),
    ("exclusiveMaximum", operator.lt, "must be <"),
)


def _validate_number(
    instance: int | float, schema: dict[str, Any], path: str, errors: list[str]
) -> None:
    for key, holds, text in _BOUNDS:
        if key in schema and not holds(instance, schema[key]):
            errors.append(f"{path}: {instance!r} {text} {schema[key]!r}")


def _validate_array(
    instance: list[Any], schema: dict[str, Any], path: str, errors: list[str]
) -> None:
    if "minItems" in schema and len(instance) < schema["minItems"]:
        errors.append(f"{path}: fewer than {schema['minItems']} items")
    if "maxItems" in schema and len(instance) > schema["maxItems"]:
        errors.append(f"{path}: more than {schema['maxItems']} items")
    if schema.get("uniqueItems") is True and _has_duplicates(instance):
        errors.append(f"{path}: items are not unique")
    prefix = schema.get("prefixItems", [])
    for index, item in enumerate(instance):
        sub = prefix[index] if index < len(prefix) else schema.get("items", True)
        _validate(item, sub, _ptr(path, index), errors)


def _has_duplicates(items: list[Any]) -> bool:
    return any(json_equal(a, b) for i, a in enumerate(items) for b in items[i + 1 :])


def _validate_object(
    instance: dict[str, Any], schema: dict[str, Any], path: str, errors: list[str]
) -> None:
    if "minProperties" in schema and len(instance) < schema["minProperties"]:
        errors.append(f"{path}: fewer than {schema['minProperties']} properties")
    if "maxProperties" in schema and len(instance) > schema["maxProperties"]:
        errors.append(f"{path}: more than {schema['maxProperties']} properties")
    for name in schema.get("required", []):
        if name not in instance:
            errors.append(f"{path}: missing required property {name!r}")
    properties: dict[str, Any] = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for name, value in instance.items():
        if name in properties:
            _validate(value, properties[name], _ptr(path, name), errors)
        elif extra is False:
            errors.append(f"{path}: property {name!r} is not allowed")
        else:
            _validate(value, extra, _ptr(path, name), errors)


def _validate_combinators(
    instance: Any, schema: dict[str, Any], path: str, errors: list[str]
) -> None:
    for sub in schema.get("allOf", []):
        _validate(instance, sub, path, errors)
    if "anyOf" in schema and not any(_passes(instance, s) for s in schema["anyOf"]):
        errors.append(f"{path}: value matches none of the anyOf schemas")
    if "oneOf" in schema:
        matched = sum(1 for s in schema["oneOf"] if _passes(instance, s))
        if matched != 1:
            errors.append(f"{path}: value matches {matched} of the oneOf schemas, not exactly 1")
    if "not" in schema and _passes(instance, schema["not"]):
        errors.append(f"{path}: value matches the schema under `not`")


def _passes(instance: Any, schema: Any) -> bool:
    found: list[str] = []
    _validate(instance, schema, "/", found)
    return not found
