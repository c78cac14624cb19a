"""The spec facts of each model-provider kind (spec/dsl.md §5): default endpoint and
credential, and the ``providerOptions`` keys it accepts.

Job: one small, import-light table — the workflow models fill an absent ``endpoint`` or
``credential`` from it, and the coordinator knows which environment variables are provider
credentials, without either importing the other (importing ``core.dsl`` builds every
workflow model, which a command on existing state must not pay for).

Invariant: a kind named here is a provider kind of ``core.registry`` (``model.<kind>``).
"""

from __future__ import annotations

DEFAULT_ENDPOINTS: dict[str, str] = {
    "openai": "https://api.openai.com/v1/responses",
    "anthropic": "https://api.anthropic.com/v1/messages",
    "google": "https://generativelanguage.googleapis.com/v1beta/models",
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
