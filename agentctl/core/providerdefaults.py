"""The spec facts of each model-provider kind (spec/dsl.md §5): default endpoint and
credential, the path an endpoint must end with, and the ``providerOptions`` keys it accepts.

Job: one small, import-light table — the workflow models fill an absent ``endpoint`` or
``credential`` from it, and the coordinator knows which environment variables are provider
credentials, without either importing the other (importing ``core.dsl`` builds every
workflow model, which a command on existing state must not pay for).

Invariants:
- a kind named here is a provider kind of ``core.registry`` (a model entry named as the kind);
- ``endpoint_problem`` is the one rule for an endpoint's path: the worker's adapter refuses a
  call with its answer, and a run's pre-flight refuses the plan before any run exists.
"""

from __future__ import annotations

DEFAULT_ENDPOINTS: dict[str, str] = {
    "openai": "https://api.openai.com/v1/responses",
    "anthropic": "https://api.anthropic.com/v1/messages",
    "google": "https://generativelanguage.googleapis.com/v1beta/models",
}
# An endpoint is the URL of the API operation (docs/providers.md): what its path ends with.
# ``azure_openai`` names its resource instead; the adapter appends the operation's path.
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
    """Why a ``kind`` provider's adapter refuses ``endpoint``, or None when it takes it.

    A trailing ``/`` is ignored. A google endpoint also names its API version in the segment
    before ``/models`` (``…/v1beta/models``): the SDK is given the two apart.
    """
    suffix = ENDPOINT_SUFFIXES.get(kind)
    if suffix is None:
        return None
    path = endpoint.rstrip("/")
    if kind == "google":
        base, _, version = path.removesuffix(suffix).rpartition("/")
        if not path.endswith(suffix) or not version or "://" not in base:
            return f"a google endpoint ends with /{{apiVersion}}{suffix}: {endpoint}"
        return None
    if not path.endswith(suffix):
        article = "an" if kind[0] in "aeiou" else "a"
        return f"{article} {kind} endpoint ends with {suffix}: {endpoint}"
    return None
