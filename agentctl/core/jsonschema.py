"""JSON Schema (Draft 2020-12) for workflow schemas, through the ``jsonschema`` package.

Workflow schemas (output contracts, agent ``structuredOutput``, tool and extension input/output
schemas, sub-workflow boundaries, reconciliation results) are checked with ``check_schema`` when
a workflow is compiled and applied with ``validate`` when a value crosses them.

Invariants:
- Draft 2020-12 only: a ``$schema`` naming another draft is reported, so ``items: [...]`` can
  never silently change meaning.
- Stricter than the standard in two ways, both reported by ``check_schema`` with the JSON
  Pointer of the offending keyword: an unknown keyword (a typo would otherwise make a
  constraint vacuous), and a ``$ref``/``$dynamicRef`` that is not a fragment of the schema
  itself (``#…``) or does not resolve inside it — nothing is ever fetched.
- ``validate`` refuses (``ValidationError``) a schema that ``check_schema`` rejects.
- Booleans are never numbers (``true`` is not an ``integer``, ``true != 1`` in ``enum``); an
  integral float such as ``1.0`` *is* an ``integer``, as JSON Schema defines it.
- ``format`` is an annotation and asserts nothing, as Draft 2020-12 specifies by default.
- Messages read ``<json-pointer>: <problem>``; the root is ``/``. The package and its
  ``referencing`` companion are imported on first use, so a workflow without schemas never
  pays for them (``agentctl check`` stays fast); a schema that is only ``type`` — the default
  output contract of every task — is applied here, with the package's semantics, so plain
  runs do not import it either.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentctl.core.jsonschema_text import problem_text, schema_problem_text, type_of
from agentctl.core.jsonvalue import JsonValue, as_list, as_object
from agentctl.errors import ValidationError

__all__ = ["SchemaProblem", "check_schema", "is_valid", "schema_problems", "type_of", "validate"]

if TYPE_CHECKING:
    from jsonschema.protocols import Validator
    from referencing import Registry
    from referencing._core import Resolver
    from referencing.jsonschema import Schema

DRAFT = "https://json-schema.org/draft/2020-12/schema"
_TYPE_NAMES = frozenset({"null", "boolean", "integer", "number", "string", "array", "object"})
_ROOT_URI = "urn:agentctl:schema"

# Keywords whose value is one subschema, a map of subschemas, or an array of subschemas.
_SCHEMA_ONE = frozenset(
    {
        "additionalProperties",
        "items",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
    }
)
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "dependentSchemas"})
_SCHEMA_LISTS = frozenset({"prefixItems", "allOf", "anyOf", "oneOf"})
_NAMES_EXTRA = frozenset({"additionalProperties", "unevaluatedProperties"})
_REFS = frozenset({"$ref", "$dynamicRef"})
_VALUES = frozenset(
    {
        "type",
        "enum",
        "const",
        "multipleOf",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "maxContains",
        "minContains",
        "maxProperties",
        "minProperties",
        "required",
        "dependentRequired",
    }
)
ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "$anchor",
        "$dynamicAnchor",
        "$vocabulary",
        "$comment",
        "title",
        "description",
        "default",
        "deprecated",
        "readOnly",
        "writeOnly",
        "examples",
        "format",
        "contentEncoding",
        "contentMediaType",
    }
)
KEYWORDS = _SCHEMA_ONE | _SCHEMA_MAPS | _SCHEMA_LISTS | _REFS | _VALUES | ANNOTATIONS
# Keywords of older drafts that 2020-12 renamed: name the replacement instead of "unknown".
_RENAMED = {
    "definitions": "$defs",
    "dependencies": "dependentRequired / dependentSchemas",
    "additionalItems": "items (with prefixItems)",
    "$recursiveRef": "$dynamicRef",
    "$recursiveAnchor": "$dynamicAnchor",
}


def _ptr(base: str, *parts: str | int) -> str:
    escaped = (str(p).replace("~", "~0").replace("/", "~1") for p in parts)
    return base.rstrip("/") + "".join("/" + p for p in escaped) or "/"


# --- schema well-formedness ---------------------------------------------------------------


def check_schema(schema: object, pointer: str = "/") -> list[str]:
    """Every well-formedness problem of ``schema``; an empty list means it is usable."""
    return [p.message(pointer) for p in schema_problems(schema)]


def schema_problems(schema: object) -> tuple[SchemaProblem, ...]:
    """Every well-formedness problem of ``schema``, each with where it is."""
    return _compiled(_key(schema)).problems


@dataclass(frozen=True)
class SchemaProblem:
    """One problem of a schema: the path of the offending keyword or value, and what is wrong."""

    path: tuple[str | int, ...]
    text: str
    about_key: bool = False  # the keyword itself is wrong (unknown), not its value

    def message(self, base: str = "/") -> str:
        return _ptr(base, *self.path) + ": " + self.text

    @property
    def dotted(self) -> str:
        """The path as the workflow diagnostics write it (``properties.a.$ref``)."""
        return ".".join(str(part) for part in self.path)


@dataclass(frozen=True)
class _Compiled:
    """A JSON Schema checked once: its problems, or the validator made from it."""

    problems: tuple[SchemaProblem, ...]
    validator: Validator | None


def _key(schema: object) -> str:
    # The cache key keeps booleans apart from numbers (json.dumps writes true, not 1).
    # Every value ``json`` encodes is taken (the coordinator checks an operator's file as read);
    # what the metaschema then refuses is reported, what json cannot encode raises.
    return json.dumps(schema, sort_keys=True, ensure_ascii=False)


@functools.lru_cache(maxsize=256)
def _compiled(key: str) -> _Compiled:
    """The problems of a schema and, when it has none, its validator (cached per schema)."""
    from jsonschema import Draft202012Validator

    schema: JsonValue = json.loads(key)
    meta = Draft202012Validator(
        Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER
    )
    found = [
        SchemaProblem(tuple(e.absolute_path), schema_problem_text(e))
        for e in meta.iter_errors(schema)
    ]
    if not found:
        registry = _registry(schema)
        found.extend(_walk(schema, (), registry.resolver(base_uri=_ROOT_URI)))
    problems = tuple(dict.fromkeys(found))  # the metaschema repeats itself per vocabulary
    if problems:
        return _Compiled(problems, None)
    usable = _without_false(schema)
    return _Compiled((), Draft202012Validator(_as_schema(usable), registry=_registry(usable)))


def _without_false(schema: JsonValue) -> JsonValue:
    """``schema`` with each nested ``false`` spelt ``{"not": {}}`` (the same meaning): the
    package reports a nested ``false`` without the instance path, ``not`` with it. A ``false``
    for additional or unevaluated properties stays: its own error names the property. Only a
    schema the metaschema accepted comes here: its maps are objects and its lists arrays."""
    if not isinstance(schema, dict):
        return schema
    copy = dict(schema)
    for key, value in schema.items():
        if key in _SCHEMA_ONE and key not in _NAMES_EXTRA:
            copy[key] = _nested(value)
        elif key in _SCHEMA_MAPS:
            copy[key] = {name: _nested(sub) for name, sub in as_object(value).items()}
        elif key in _SCHEMA_LISTS:
            copy[key] = [_nested(sub) for sub in as_list(value)]
    return copy


def _nested(schema: JsonValue) -> JsonValue:
    return {"not": {}} if schema is False else _without_false(schema)


def _registry(schema: JsonValue) -> Registry[Schema]:
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    # The default retrieval fails for every URI: nothing outside the schema is ever fetched.
    resource = DRAFT202012.create_resource(_as_schema(schema))
    registry: Registry[Schema] = Registry().with_resource(_ROOT_URI, resource).crawl()
    return registry


def _as_schema(schema: JsonValue) -> Schema:
    # Only a schema the metaschema accepted comes here: a boolean or an object.
    return schema if isinstance(schema, bool) else as_object(schema)


def _walk(
    schema: JsonValue, path: tuple[str | int, ...], resolver: Resolver[Schema]
) -> Iterator[SchemaProblem]:
    """Our strictness on top of the metaschema: known keywords and local references only."""
    if not isinstance(schema, dict):
        return
    if "$id" in schema:
        from referencing.jsonschema import DRAFT202012

        resolver = resolver.in_subresource(DRAFT202012.create_resource(schema))
    for key, value in schema.items():
        here = (*path, key)
        if key in _REFS:
            yield from _check_ref(str(value), here, resolver)
        elif key == "$schema" and str(value).rstrip("#") != DRAFT:
            yield SchemaProblem(here, f"only JSON Schema Draft 2020-12 is supported (`{DRAFT}`)")
        elif key in _RENAMED:
            text = f"`{key}` is not a Draft 2020-12 keyword; use `{_RENAMED[key]}`"
            yield SchemaProblem(here, text, about_key=True)
        elif key not in KEYWORDS:
            yield SchemaProblem(here, f"unknown schema keyword `{key}`", about_key=True)
        else:
            for sub_path, sub in _subschemas(key, value, here):
                yield from _walk(sub, sub_path, resolver)


def _subschemas(
    key: str, value: JsonValue, here: tuple[str | int, ...]
) -> Iterable[tuple[tuple[str | int, ...], JsonValue]]:
    # The metaschema accepted the schema first: its maps are objects and its lists arrays.
    if key in _SCHEMA_ONE:
        return [(here, value)]
    if key in _SCHEMA_MAPS:
        return [((*here, name), sub) for name, sub in as_object(value).items()]
    if key in _SCHEMA_LISTS:
        return [((*here, index), sub) for index, sub in enumerate(as_list(value))]
    return []


def _check_ref(
    ref: str, here: tuple[str | int, ...], resolver: Resolver[Schema]
) -> Iterator[SchemaProblem]:
    from referencing.exceptions import Unresolvable

    if not ref.startswith("#"):
        yield SchemaProblem(
            here,
            f"`{here[-1]}` {ref!r} points outside this schema; only references inside it "
            "(starting with `#`) are allowed, and nothing is fetched",
        )
        return
    try:
        resolver.lookup(ref)
    except Unresolvable:
        yield SchemaProblem(here, f"`{here[-1]}` {ref!r} does not resolve inside this schema")


# --- instance validation ------------------------------------------------------------------


def validate(instance: JsonValue, schema: JsonValue) -> list[str]:
    """Every way ``instance`` violates ``schema``; empty when valid.

    Raises ``ValidationError`` when the schema itself is malformed.
    """
    expected = _type_only(schema)
    if expected is not None:  # the default contract of every task: no package import
        if _type_matches(instance, expected):
            return []
        return [f"/: expected {' or '.join(expected)}, got {type_of(instance)}"]
    compiled = _compiled(_key(schema))
    if compiled.validator is None:
        problems = [p.message() for p in compiled.problems]
        raise ValidationError("invalid JSON Schema: " + "; ".join(problems))
    found: list[str] = []
    for error in compiled.validator.iter_errors(instance):
        where = _ptr("/", *error.absolute_path)
        found.extend(f"{where}: {text}" for text in problem_text(error))
    return list(dict.fromkeys(found))


def _type_only(schema: JsonValue) -> list[str] | None:
    """The type names of ``{"type": NAME}`` or ``{"type": [distinct NAMEs]}`` with known
    names and nothing else; ``None`` for any other schema."""
    if not isinstance(schema, dict) or schema.keys() != {"type"}:
        return None
    given = schema["type"]
    names = given if isinstance(given, list) else [given]
    known = [n for n in names if isinstance(n, str) and n in _TYPE_NAMES]
    return known if known and len(known) == len(names) == len(set(known)) else None


def _type_matches(instance: JsonValue, expected: list[str]) -> bool:
    """Draft 2020-12 ``type``: an integer is a number; an integral float is an integer."""
    actual = type_of(instance)
    for name in expected:
        if name == actual or (name == "number" and actual == "integer"):
            return True
        if name == "integer" and isinstance(instance, float) and instance.is_integer():
            return True
    return False


def is_valid(instance: JsonValue, schema: JsonValue) -> bool:
    return not validate(instance, schema)
