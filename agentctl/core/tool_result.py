"""What an agent's tool call gives the model, and whether an operator's ``applied`` result can
stand for it (spec/dsl.md §5 tools, spec/cli.md §4 reconciliation).

A tool kind may shape its executor's raw result (a read's ``{status, changed, content}``
becomes ``{path, bytes, sha256, content}``); the model receives the shaped output, and the
tool's ``outputSchema`` judges that, not the raw result. An operator who reconciles a tool
call's effect ``applied`` gives the raw result the executor would have returned, so it is
shaped the same way before it is judged.

Invariants:
- a result is shaped only by its kind's registry shape and only when it is a JSON object (the
  agent's rule: anything else reaches the schema as it is);
- the shaped output must meet the tool's declared ``outputSchema``, or be a JSON object when
  it declares none: one rule for the agent receiving it and for the reconciliation.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentctl.core import jsonschema, registry
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_object

DEFAULT_OUTPUT_SCHEMA: JsonObject = {"type": "object"}


def shaped_output(kind: str, args: JsonValue, result: JsonValue) -> JsonValue:
    """What the model receives for a ``kind`` tool called with ``args`` that gave ``result``."""
    entry = registry.find(kind)
    if entry is None or entry.shape is None or not isinstance(result, dict):
        return result
    return entry.shape(args, result)


def output_problems(tool: Mapping[str, JsonValue], output: JsonValue) -> list[str]:
    """Why ``output`` (shaped) breaks the tool's ``outputSchema``; none when it meets it."""
    schema = tool.get("outputSchema") or DEFAULT_OUTPUT_SCHEMA
    return jsonschema.validate(output, as_object(schema))
