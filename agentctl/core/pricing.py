"""Model-call cost in micro-USD from ``runtime.pricing`` (spec/dsl.md §8, spec/cli.md §7).

A price names micro-USD per million tokens for each token kind: input and output are
required; reasoning defaults to the output rate, cache read and cache write to the input
rate. Prices are keyed ``provider/model``, where ``provider`` is the provider's name under
``spec.providers`` (its kind is accepted too, so one table can serve several providers of a
kind).

Invariants: pure integer arithmetic, costs rounded *up* to a whole micro-USD (a budget never
under-counts); a reservation prices every token at the highest rate of the price, so the
settled actual never exceeds it for the same token counts; no price means no cost (the call
counts as an unpriced provider request).
"""

from __future__ import annotations

from collections.abc import Mapping

from agentctl.core.jsonvalue import JsonValue, as_object

PER_MILLION = 1_000_000
# usage counter → (the rate's key, the key whose rate it defaults to)
_RATES: dict[str, tuple[str, str]] = {
    "inputTokens": ("inputMicrousdPerMillionTokens", "inputMicrousdPerMillionTokens"),
    "outputTokens": ("outputMicrousdPerMillionTokens", "outputMicrousdPerMillionTokens"),
    "reasoningTokens": ("reasoningMicrousdPerMillionTokens", "outputMicrousdPerMillionTokens"),
    "cacheReadTokens": ("cacheReadMicrousdPerMillionTokens", "inputMicrousdPerMillionTokens"),
    "cacheWriteTokens": ("cacheWriteMicrousdPerMillionTokens", "inputMicrousdPerMillionTokens"),
}
# The token counters an answer's usage reports and a model call settles (each one priced).
TOKEN_COUNTERS = tuple(_RATES)


def token_spend(usage: Mapping[str, JsonValue]) -> dict[str, int]:
    """The token counters one answer's ``usage`` settles: each counter's non-negative integer
    (a missing or malformed one counts 0, as an API that does not report it) and
    ``totalTokens`` = input + output — the one rule a settled answer and a reconciled one use."""
    spent = {}
    for counter in TOKEN_COUNTERS:
        value = usage.get(counter)
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        spent[counter] = value if ok and isinstance(value, int) else 0
    spent["totalTokens"] = spent["inputTokens"] + spent["outputTokens"]
    return spent


def price_for(
    pricing: Mapping[str, JsonValue] | None, provider: str, kind: str, model: str
) -> dict[str, int] | None:
    """The rates of ``provider/model`` (else ``kind/model``), every rate filled; None: unpriced."""
    models = as_object((pricing or {}).get("models") or {})
    raw = models.get(f"{provider}/{model}") or models.get(f"{kind}/{model}")
    if not isinstance(raw, dict):
        return None
    given = as_object(raw)
    rates: dict[str, int] = {}
    for counter, (key, fallback) in _RATES.items():
        value = given.get(key)
        if not isinstance(value, int):
            value = given.get(fallback)
        rates[counter] = value if isinstance(value, int) else 0
    return rates


# A model answer's usage key that is a price, not a token counter: never summed as tokens.
COST_KEY = "costMicrousd"


def add_token_counts(
    total: dict[str, int], usage: Mapping[str, JsonValue], *, sign: int = 1
) -> None:
    """Add one answer's token counters (its integer entries but the cost) to ``total``: the
    one rule an agent attempt's output usage and its provider session both sum by. ``sign``
    -1 takes a superseded answer's counters back out (a repeated reconciliation)."""
    for key, value in usage.items():
        if isinstance(value, int) and not isinstance(value, bool) and key != COST_KEY:
            total[key] = total.get(key, 0) + sign * value


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def cost_microusd(rates: Mapping[str, int], usage: Mapping[str, int]) -> int:
    """What ``usage`` costs at ``rates``, rounded up."""
    total = sum(int(usage.get(counter, 0)) * rate for counter, rate in rates.items())
    return _ceil_div(total, PER_MILLION)


def max_cost_microusd(rates: Mapping[str, int], tokens: int) -> int:
    """The most ``tokens`` tokens of any kind can cost: what a reservation holds."""
    highest = max(rates.values(), default=0)
    return _ceil_div(tokens * highest, PER_MILLION)
