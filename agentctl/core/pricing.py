"""Model-call cost in micro-USD from ``runtime.pricing`` (spec/dsl.md §8, spec/cli.md §7).

A price names micro-USD per million tokens for each token kind: input and output are
required; reasoning defaults to the output rate, cache read and cache write to the input
rate. Prices are keyed ``provider/model``, where ``provider`` is the provider's name under
``spec.providers`` (its kind is accepted too, so one table can serve several providers of a
kind).

The normalized usage every adapter reports (docs/providers.md): ``inputTokens`` is every input
token the call processed, cache reads and writes included; ``outputTokens`` every token it
generated, reasoning included; ``cacheReadTokens`` and ``cacheWriteTokens`` are parts of the
input, ``reasoningTokens`` a part of the output. So ``maxInputTokens``, ``maxOutputTokens`` and
``maxTotalTokens`` count the same thing whatever the provider, and ``cost_microusd`` bills
each token once: the input's cache parts at their rates and the rest at the input rate, the
output's reasoning part at its rate and the rest at the output rate.

Invariants: pure integer arithmetic, costs rounded *up* to a whole micro-USD (a budget never
under-counts); a part larger than its whole (a server's error) is cut to the whole, so no
token is billed twice and no count goes negative; a reservation prices every input and
output token at the highest rate of the price, so the settled actual never exceeds it for the
same input and output counts; no price means no cost (the call counts as an unpriced provider
request).
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


def pricing_keys(provider: str, kind: str, model: str) -> tuple[str, str]:
    """The ``runtime.pricing.models`` keys that price ``model`` of ``provider``, first found
    first: its name under ``spec.providers``, then its kind (``check`` uses the same)."""
    return f"{provider}/{model}", f"{kind}/{model}"


def price_for(
    pricing: Mapping[str, JsonValue] | None, provider: str, kind: str, model: str
) -> dict[str, int] | None:
    """The rates of ``provider/model`` (else ``kind/model``), every rate filled; None: unpriced."""
    models = as_object((pricing or {}).get("models") or {})
    raw = next((models[k] for k in pricing_keys(provider, kind, model) if k in models), None)
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
    """Add one answer's token counters to ``total``: the one rule an agent attempt's output
    usage and its provider session both sum by. Every counter of ``TOKEN_COUNTERS`` is
    added, one the answer leaves out as 0 (as ``token_spend`` counts it), so the sum always
    has the documented shape; any other key of the answer's usage (an operator's
    ``totalTokens``, the cost) is no token count and is never summed. ``sign`` -1 takes a
    superseded answer's counters back out (a repeated reconciliation)."""
    spent = token_spend(usage)
    for key in TOKEN_COUNTERS:
        total[key] = total.get(key, 0) + sign * spent[key]


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def _billed(usage: Mapping[str, JsonValue]) -> dict[str, int]:
    """How many tokens of ``usage`` (the normalized counters) each rate bills: the parts as
    reported (cut to what their whole leaves: cache read first, then cache write), and
    ``inputTokens``/``outputTokens`` what remains of each whole. The values sum to input +
    output."""
    counts = token_spend(usage)
    inputs, outputs = counts["inputTokens"], counts["outputTokens"]
    cache_read = min(counts["cacheReadTokens"], inputs)
    cache_write = min(counts["cacheWriteTokens"], inputs - cache_read)
    reasoning = min(counts["reasoningTokens"], outputs)
    return {
        "inputTokens": inputs - cache_read - cache_write,
        "cacheReadTokens": cache_read,
        "cacheWriteTokens": cache_write,
        "outputTokens": outputs - reasoning,
        "reasoningTokens": reasoning,
    }


def cost_microusd(rates: Mapping[str, int], usage: Mapping[str, JsonValue]) -> int:
    """What ``usage`` (the normalized counters) costs at ``rates``, each token billed once,
    rounded up: the one price of a settled answer, an agent's answer and a reconciled one."""
    billed = _billed(usage)
    total = sum(count * rates.get(counter, 0) for counter, count in billed.items())
    return _ceil_div(total, PER_MILLION)


def max_cost_microusd(rates: Mapping[str, int], tokens: int) -> int:
    """The most ``tokens`` tokens of any kind can cost: what a reservation holds."""
    highest = max(rates.values(), default=0)
    return _ceil_div(tokens * highest, PER_MILLION)
