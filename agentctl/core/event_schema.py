"""The JSON Schema of one ``--output jsonl`` event line: the stable contract of the stream.

Pure data. docs/events.md prints the same schema (a test keeps them equal) and every line a
run prints in the tests is validated against it. Adding an optional field or a new ``type``
value is compatible; renaming or removing a field, or changing a type, is not (a new
``apiVersion`` would be needed).
"""

from __future__ import annotations

from agentctl.core.jsonvalue import JsonObject

_ID: JsonObject = {"type": "string", "minLength": 1}
_OPT_ID: JsonObject = {"type": ["string", "null"]}
_TIME: JsonObject = {"type": "string", "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$"}

_RUN_EVENT: JsonObject = {
    "type": "object",
    "required": ["type", "runId", "traceId", "sequence", "time", "taskId", "effectId", "payload"],
    "properties": {
        "type": {"type": "string", "pattern": r"^[a-z_]+\.[a-z_.]+$"},
        "runId": _ID,
        "traceId": _ID,
        "sequence": {"type": "integer", "minimum": 1},
        "time": _TIME,
        "taskId": _OPT_ID,
        "effectId": _OPT_ID,
        "payload": {},
    },
}

_STREAM_EVENT: JsonObject = {
    "type": "object",
    "required": [
        "runId",
        "traceId",
        "taskId",
        "attempt",
        "sequence",
        "effectId",
        "eventType",
        "payload",
        "truncated",
        "createdAt",
    ],
    "properties": {
        "runId": _ID,
        "traceId": _ID,
        "taskId": _ID,
        "attempt": {"type": "integer", "minimum": 1},
        "sequence": {"type": "integer", "minimum": 1},
        "effectId": _ID,
        "providerSequence": {"type": ["integer", "null"]},
        "eventType": {"type": "string", "pattern": r"^[a-z_]+\.delta$"},
        "payload": {"type": "object"},
        "truncated": {"type": "boolean"},
        "createdAt": _TIME,
        "sourceRunId": _OPT_ID,
        "sourceSequence": {"type": ["integer", "null"]},
    },
}


def _line(kind: str, data: JsonObject) -> JsonObject:
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "ok", "data", "diagnostics"],
        "properties": {
            "apiVersion": {"const": "agentctl.dev/cli/v1"},
            "kind": {"const": kind},
            "ok": {"const": True},
            "data": data,
            "diagnostics": {"type": "array"},
        },
    }


EVENT_LINE_SCHEMA: JsonObject = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://agentctl.dev/schemas/cli/v1/event-line.json",
    "title": "agentctl --output jsonl event line",
    "oneOf": [_line("RunEvent", _RUN_EVENT), _line("StreamEvent", _STREAM_EVENT)],
}
