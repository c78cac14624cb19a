"""What the coordinator adds to a model call before and after a worker makes it.

Before: the secret references a builder named (``Built.secret_refs``: the credential, each
header, the egress policy's ``customCa``) are resolved; after: the answer's usage is turned
into what the budget ledger settles.

Invariants:
- a resolved value goes only into the request sent to the worker; the recorded input (the
  effect's identity, the ledger) keeps ``{source, sha256}`` at the same place, and the values
  travel with the call so everything recorded from it is redacted;
- a provider's conventional credential variable (``OPENAI_API_KEY``, …) is readable without
  ``policy.environmentAllowlist``; every other variable must be listed (spec/cli.md §12);
- ``providerRequests`` and ``turns`` count every dispatched call; tokens and cost come from
  the usage the provider reported (zero when there was no answer); a call without a price
  counts as ``unpricedProviderRequests``; a reservation holds the most the call can cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agentctl.coordinator import secrets
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.operations import Built, RunContext, pointer
from agentctl.core.pricing import cost_microusd, max_cost_microusd, token_spend
from agentctl.core.providerdefaults import CREDENTIAL_ENVS

CREDENTIAL = pointer("credential")
DEFAULT_CREDENTIAL_ENVS = frozenset(CREDENTIAL_ENVS.values())


@dataclass(frozen=True)
class ResolvedCall:
    """A built call with its secret references resolved."""

    recorded: JsonObject  # secret-free: each reference became {source, sha256}
    request: JsonObject  # carries the values, for the worker only
    secrets: tuple[str, ...]  # the values, redacted from whatever is recorded or shown


def resolve_secret_refs(built: Built, context: RunContext, what: str) -> ResolvedCall:
    """Resolve every ``built.secret_refs`` pointer, in sorted order (a stable first failure)."""
    got = secrets.resolve_pointers(
        dict(built.recorded),
        dict(built.request),
        built.secret_refs,
        (context.policy, context.workspace, what),
        credential_envs=DEFAULT_CREDENTIAL_ENVS,
    )
    return ResolvedCall(got.recorded, got.request, got.values)


def with_cost(estimate: Mapping[str, int], rates: Mapping[str, int] | None) -> dict[str, int]:
    """A model call's reservation: the estimate plus the most its tokens can cost."""
    reserve = dict(estimate)
    if rates is not None:
        tokens = reserve.get("inputTokens", 0) + reserve.get("outputTokens", 0)
        reserve["costMicrousd"] = max_cost_microusd(rates, tokens)
    return reserve


def model_spent(usage: Mapping[str, int], rates: Mapping[str, int] | None) -> dict[str, int]:
    """What one dispatched model call consumed, from the usage its answer reported."""
    spent = {"providerRequests": 1, "turns": 1, **token_spend(usage)}
    if rates is None:
        spent["unpricedProviderRequests"] = 1
    else:
        spent["costMicrousd"] = cost_microusd(rates, spent)
    return spent


def reply_cost(usage: Mapping[str, JsonValue], rates: Mapping[str, int] | None) -> int | None:
    """What one answer cost (its ``usage``), or None when the model has no price."""
    return None if rates is None else cost_microusd(rates, usage)
