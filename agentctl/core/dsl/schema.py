"""The JSON Schema of the workflow document (``agentctl schema``), generated from the models.

Invariants:
- generated, never hand-written: the same strict pydantic models that load workflows produce
  it (camelCase keys, ``additionalProperties: false`` on every object, the defaults and numeric
  ranges of spec/dsl.md), so it cannot drift from what ``check`` accepts;
- Draft 2020-12 (``$schema``); action, provider and tool ``kind`` values are listed from the
  operation registry, so a kind registered at run time appears too;
- it describes the shape only: cross-references, templates and kind-specific rules are still
  ``check``'s job. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from agentctl.core import registry
from agentctl.core.dsl.workflow import API_VERSIONS, Workflow
from agentctl.core.jsonvalue import JsonObject
from agentctl.core.operations import Family

SCHEMA_ID = "https://agentctl.dev/schemas/workflow.json"
_KINDS: dict[str, Family] = {"Action": "action", "Tool": "tool"}


def workflow_json_schema() -> JsonObject:
    """The document schema, ready to print (keys in a stable order)."""
    schema: dict[str, Any] = Workflow.model_json_schema(by_alias=True)
    defs = schema.get("$defs") or {}
    for model, family in _KINDS.items():
        kind = (defs.get(model) or {}).get("properties", {}).get("kind")
        if isinstance(kind, dict):
            kind["enum"] = [op.name for op in registry.entries(family) if op.accepted]
    version = schema.get("properties", {}).get("apiVersion")
    if isinstance(version, dict):
        version["enum"] = list(API_VERSIONS)
    head: JsonObject = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "agentctl workflow",
    }
    return {**head, **{k: v for k, v in schema.items() if k != "title"}}
