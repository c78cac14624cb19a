"""Long-term memory entries: one normal form for every way a write may be written.

A workflow's ``builtin.long_term_memory.write`` and ``agentctl memory put`` both store an
``Entry``: a JSON ``value``, the ``text`` searches look at, and exact-match ``metadata``. A
write gives either a plain ``value`` (optionally with ``text``) or a typed ``content`` block —
``{type: text, text}`` (the text is also the value) or ``{type: json, value, text?}``.

Invariants:
- the searchable text is the given text, else the value itself when it is a string, else the
  value's canonical JSON — so every entry is searchable, legacy ones included;
- an entry (value, text and metadata as canonical JSON) is at most ``MAX_ENTRY_BYTES``;
- every refusal is a ``ValidationError`` naming the offending ``with`` key; callers that run
  inside a task re-raise it as the task's failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agentctl.core.canonical import canonical_json
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.errors import ValidationError

MAX_ENTRY_BYTES = 1_048_576
MAX_RETENTION_DAYS = 36_500


@dataclass(frozen=True)
class Entry:
    """What one long-term key holds."""

    value: JsonValue
    text: str
    metadata: JsonObject

    def to_json(self) -> JsonObject:
        return {"value": self.value, "text": self.text, "metadata": dict(self.metadata)}


def derived_text(value: JsonValue) -> str:
    """The searchable text of a value written without one."""
    return value if isinstance(value, str) else canonical_json(value)


def entry_from_args(args: Mapping[str, JsonValue]) -> Entry:
    """The entry a write's arguments describe (``value`` / ``content``, ``text``, ``metadata``)."""
    value, text = _content(args)
    given = args.get("text")
    if given is not None and not isinstance(given, str):
        raise ValidationError(f"`text` must be a string, got {given!r}")
    text = given if given is not None else text
    metadata = args.get("metadata")
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise ValidationError(f"`metadata` must be an object, got {metadata!r}")
    entry = Entry(value, text if text is not None else derived_text(value), metadata)
    size = len(canonical_json(entry.to_json()).encode("utf-8"))
    if size > MAX_ENTRY_BYTES:
        raise ValidationError(f"a long-term entry is {size} bytes; the limit is {MAX_ENTRY_BYTES}")
    return entry


def _content(args: Mapping[str, JsonValue]) -> tuple[JsonValue, str | None]:
    """The value and the content's own text (None: derive it) of a write."""
    content = args.get("content")
    if content is None:
        return args.get("value"), None
    if args.get("value") is not None:
        raise ValidationError("give either `value` or `content`, not both")
    if not isinstance(content, dict) or content.get("type") not in ("text", "json"):
        raise ValidationError(
            "`content` must be {type: text, text: …} or {type: json, value: …, text?: …}"
        )
    text = content.get("text")
    if content["type"] == "text":
        if not isinstance(text, str):
            raise ValidationError("`content.text` must be a string for `type: text`")
        return text, text
    if text is not None and not isinstance(text, str):
        raise ValidationError("`content.text` must be a string")
    return content.get("value"), text


def literal_write_problems(given: Mapping[str, JsonValue]) -> list[tuple[str, str]]:
    """What ``check`` can tell about a write's literal ``with`` values (templates render later)."""
    found: list[tuple[str, str]] = []
    if "entry" in given and ("value" in given or "content" in given):
        found.append(("entry", "is the payload `value` or `content` also give: give one"))
    for key in ("retentionDays", "metadata", "content", "text"):
        value = given.get(key)
        if key not in given or (isinstance(value, str) and "${{" in value):
            continue
        try:
            if key == "retentionDays":
                retention_days_of(value)
            else:
                entry_from_args({key: value})
        except ValidationError as exc:
            found.append((key, f"is invalid: {exc.message}"))
    return found


def retention_days_of(value: JsonValue, where: str = "retentionDays") -> int | None:
    """A retention in days (1..36,500), or None for an entry that never expires."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"`{where}` must be an integer number of days, got {value!r}")
    if not 1 <= value <= MAX_RETENTION_DAYS:
        raise ValidationError(f"`{where}` must be 1..{MAX_RETENTION_DAYS}, got {value}")
    return value
