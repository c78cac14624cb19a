"""The shape of one model call's answer, as every provider executor returns it (spec/cli.md §4).

An operator who reconciles a model effect ``applied`` gives the answer the call got: the
resumed agent takes it exactly as a provider's reply (its finish, text, tool calls and usage),
so a result of another shape is refused before anything is recorded.

Invariants: the shape is the executors' ``{finish, text, toolCalls, usage}`` with
``finish`` one of complete | tool_calls | max_tokens | refusal and each usage counter given
a non-negative integer (a counter left out counts 0, as an API that does not report it);
only model calls are judged here (the registry says which operations are: their effect class
``model``, under the provider kind's name or a legacy ``model.<kind>``).
"""

from __future__ import annotations

from agentctl.core import jsonschema, registry
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.pricing import TOKEN_COUNTERS

_COUNT: JsonObject = {"type": "integer", "minimum": 0}
_TOOL_CALL: JsonObject = {
    "type": "object",
    "required": ["id", "name", "arguments"],
    "properties": {"id": {"type": "string"}, "name": {"type": "string"}},
}
REPLY_SCHEMA: JsonObject = {
    "type": "object",
    "required": ["finish", "text", "toolCalls", "usage"],
    "properties": {
        "finish": {"enum": ["complete", "tool_calls", "max_tokens", "refusal"]},
        "text": {"type": "string"},
        "toolCalls": {"type": "array", "items": _TOOL_CALL},
        "usage": {"type": "object", "properties": {name: _COUNT for name in TOKEN_COUNTERS}},
    },
}


def applied_reply_problems(operation: str, result: JsonValue) -> list[str]:
    """Why ``result`` cannot stand for a model call's answer (none for other operations)."""
    if not registry.is_model(operation):
        return []
    return jsonschema.validate(result, REPLY_SCHEMA)
