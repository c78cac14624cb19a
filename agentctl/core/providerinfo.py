"""What ``agentctl providers inspect`` reports: each declared provider and what it offers.

Invariants: pure and offline — built from the normalized document alone (no service is
called, no credential is looked at); a secret reference is shown by its kind and name, never
resolved; the capability and option tables are the compiler's own (``compiler.capabilities``,
``dsl.rules``), so the report cannot disagree with what ``check`` accepts.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentctl.core import registry
from agentctl.core.compiler.capabilities import PROVIDER_CAPABILITIES
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_object
from agentctl.core.providerdefaults import PROVIDER_OPTIONS

# How machine output names a reference kind: the original's reports say ``environment`` for an
# ``{env}`` reference, and scripts written for it compare against that word. Human text keeps
# the short document key (``env OPENAI_API_KEY``).
REFERENCE_KIND_NAMES = {"env": "environment"}


def reference_json(ref: JsonValue) -> JsonValue:
    """``secret_reference`` as machine output shows it (``{kind: environment, reference}``)."""
    shown = secret_reference(ref)
    if isinstance(shown, dict) and isinstance(shown.get("kind"), str):
        kind = str(shown["kind"])
        return {**shown, "kind": REFERENCE_KIND_NAMES.get(kind, kind)}
    return shown


def secret_reference(ref: JsonValue) -> JsonValue:
    """``{kind, reference}`` of a secret reference (the variable, path or helper command)."""
    given = as_object(ref)
    for kind in ("env", "file"):
        if isinstance(given.get(kind), str):
            return {"kind": kind, "reference": given[kind]}
    process = as_object(given.get("process"))
    if process:
        return {"kind": "process", "reference": process.get("command")}
    return None


def provider_capabilities(spec: Mapping[str, JsonValue]) -> JsonObject:
    """The ``ProviderCapabilities`` data of a workflow's ``spec`` (providers sorted by name)."""
    agents = as_object(spec.get("agents"))
    found: list[JsonValue] = []
    for name, raw in sorted(as_object(spec.get("providers")).items()):
        provider = as_object(raw)
        kind = str(provider.get("kind"))
        entry = registry.find_model(kind)
        used_by = sorted(
            a for a, agent in agents.items() if as_object(agent).get("provider") == name
        )
        headers = as_object(provider.get("headers"))
        found.append(
            {
                "name": name,
                "kind": kind,
                "endpoint": provider.get("endpoint"),
                "apiVersion": provider.get("apiVersion"),
                "credential": reference_json(provider.get("credential")),
                "headers": {header: reference_json(ref) for header, ref in sorted(headers.items())},
                "capabilities": list[JsonValue](sorted(PROVIDER_CAPABILITIES.get(kind, ()))),
                "providerOptions": list(PROVIDER_OPTIONS.get(kind, ())),
                "runnable": entry is not None and entry.runnable,
                "usedBy": list[JsonValue](used_by),
            }
        )
    return {"providers": found}
