"""What a reconciled effect spent: the actual its budget reservation settles with (spec/cli.md
§4 and §7).

An effect whose outcome is uncertain (the coordinator crashed or was stopped after it started)
keeps its reservation active: something may have been spent. The operator's first
``applied`` or ``not_applied`` record settles it, in the reconciliation's transaction, with
``reconciled_spend``:

- ``not_applied``: nothing (the effect did not take place);
- ``applied``: the actual usage where the recorded result tells it, else the amount reserved
  — the reservation is an upper bound, and an unknown actual stays that upper bound (never a
  guess below it):

  - a model call (a reservation with ``providerRequests``): its request and turn as reserved;
    with a provider-response ``usage`` object, the token counters from it (an absent one is 0,
    as for an answer the coordinator settles) and ``totalTokens`` = input + output, without
    one the tokens reserved; ``costMicrousd`` the usage's own integer ``costMicrousd`` when it
    gives one, else the usage priced at the model's ``rates`` (``core.pricing.cost_microusd``,
    as a settled answer is priced), else — no usage, or no rates given — the reserved cost
    (the reservation priced every token at the highest rate: an upper bound); a call without
    a reserved cost (an unpriced model) counts one ``unpricedProviderRequests``, as a settled
    answer does;
  - a ``builtin.shell.exec`` process: ``processOutputBytes`` = the UTF-8 bytes of the
    result's ``stdout`` and ``stderr`` when either is text (an extension's result is its JSON
    output, which does not tell its process output: reserved);
  - an artifact (``artifactBytes``): the result's integer ``sizeBytes`` when it gives one;
  - every other dimension (a tool call's 1, …): the amount reserved.

Pure; the caller settles only an ``active`` reservation, so a later record (a repeated
``applied``, ``applied`` → ``compensated``) never settles or counts again.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentctl.core.jsonvalue import JsonObject, JsonValue, as_object
from agentctl.core.pricing import COST_KEY, cost_microusd, token_spend

SHELL_OPERATION = "builtin.shell.exec"


def _count(value: JsonValue) -> int | None:
    """A non-negative integer (never a bool), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _model_spend(
    held: Mapping[str, int], result: JsonObject, rates: Mapping[str, int] | None
) -> dict[str, int]:
    spent = dict(held)
    usage = result.get("usage")
    if isinstance(usage, dict):
        spent.update(token_spend(usage))
        cost = _count(usage.get(COST_KEY))
        if cost is None and rates is not None:
            cost = cost_microusd(rates, usage)
        if cost is not None and COST_KEY in held:
            spent[COST_KEY] = cost
    if COST_KEY not in held:
        spent["unpricedProviderRequests"] = 1
    return spent


def _process_bytes(result: JsonObject) -> int | None:
    """The UTF-8 bytes of a process result's ``stdout`` and ``stderr``; None: neither is text."""
    streams = [s for s in (result.get("stdout"), result.get("stderr")) if isinstance(s, str)]
    return sum(len(s.encode("utf-8")) for s in streams) if streams else None


def reconciled_spend(
    operation: str,
    held: Mapping[str, int],
    status: str,
    result: JsonValue,
    rates: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """What the effect spent, for its reservation ``held`` (see the module doc); ``rates``: a
    model call's price (``core.pricing.price_for``), None when unknown or unpriced."""
    if status != "applied":
        return {}
    told = as_object(result) if isinstance(result, dict) else {}
    if "providerRequests" in held:
        return _model_spend(held, told, rates)
    spent = dict(held)
    output = _process_bytes(told) if operation == SHELL_OPERATION else None
    if "processOutputBytes" in held and output is not None:
        spent["processOutputBytes"] = output
    size = _count(told.get("sizeBytes"))
    if "artifactBytes" in held and size is not None:
        spent["artifactBytes"] = size
    return spent
