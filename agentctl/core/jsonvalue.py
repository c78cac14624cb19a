"""One recursive type for JSON values, used wherever data crosses a layer as JSON.

``JsonValue`` is exactly what ``json.loads`` can return; ``JsonObject`` is its object form.
Code that stores, hashes, sends or renders JSON takes and returns these instead of ``Any``, so
mypy sees where a value is narrowed (``isinstance``) before it is used as a mapping or text.
"""

from __future__ import annotations

from typing import TypeAlias

JsonScalar: TypeAlias = bool | int | float | str | None
JsonValue: TypeAlias = JsonScalar | list["JsonValue"] | dict[str, "JsonValue"]
JsonObject: TypeAlias = dict[str, JsonValue]
JsonArray: TypeAlias = list[JsonValue]


def as_object(value: JsonValue) -> JsonObject:
    """``value`` when it is a JSON object, else an empty object (never a shared instance)."""
    return value if isinstance(value, dict) else {}


def as_list(value: JsonValue) -> JsonArray:
    """``value`` when it is a JSON array, else an empty array (never a shared instance)."""
    return value if isinstance(value, list) else []
