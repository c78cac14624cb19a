"""The spec facts of each model-provider kind (spec/dsl.md §5): default endpoint and
credential, and the ``providerOptions`` keys it accepts.

Job: one small, import-light table — the workflow models fill an absent ``endpoint`` or
``credential`` from it, and the coordinator knows which environment variables are provider
credentials, without either importing the other (importing ``core.dsl`` builds every
workflow model, which a command on existing state must not pay for).

Invariant: a kind named here is a provider kind of ``core.registry`` (``model.<kind>``).
``endpoint_problem`` is the one rule for the path an endpoint ends with: ``check`` applies it
to the document, and each worker adapter again to the request it is sent.
"""

from __future__ import annotations

DEFAULT_ENDPOINTS: dict[str, str] = {
    "openai": "https://api.openai.com/v1/responses",
    "anthropic": "https://api.anthropic.com/v1/messages",
    "google": "https://generativelanguage.googleapis.com/v1beta/models",
}
# The API path an endpoint of each kind ends with (google's: ``/{apiVersion}/models``); an
# azure_openai endpoint is its resource's URL (the adapter appends the path).
ENDPOINT_SUFFIXES: dict[str, str] = {
    "openai": "/responses",
    "anthropic": "/v1/messages",
    "google": "/models",
}
CREDENTIAL_ENVS: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "azure_openai": "AZURE_OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "google": "GEMINI_API_KEY",
}
_OPENAI_OPTIONS = (
    "store",
    "reasoningContext",
    "promptCacheMode",
    "promptCacheTtl",
    "parallelToolCalls",
    "safetyIdentifier",
)
PROVIDER_OPTIONS: dict[str, tuple[str, ...]] = {
    "fake": ("toolInput", "finalText", "delayMs", "failFirst"),
    "openai": _OPENAI_OPTIONS,
    "azure_openai": _OPENAI_OPTIONS,
    "anthropic": (),
    "google": (),
}


def endpoint_problem(kind: str, endpoint: str) -> str | None:
    """Why ``endpoint`` cannot be a ``kind`` provider's (None: it can). The whole text is
    judged, query included: the adapters send to it as written."""
    suffix = ENDPOINT_SUFFIXES.get(kind)
    if suffix is None:
        return None
    path = endpoint.rstrip("/")
    if kind == "google":
        base, _, version = path.removesuffix(suffix).rpartition("/")
        if path.endswith(suffix) and version and "://" in base:
            return None
        return f"a google endpoint ends with /{{apiVersion}}{suffix}: {endpoint}"
    if path.endswith(suffix):
        return None
    return f"an {kind} endpoint ends with {suffix}: {endpoint}"
