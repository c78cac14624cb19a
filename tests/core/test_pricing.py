"""runtime.pricing: rates with their defaults, each token billed once (the cache counters are
parts of the input, reasoning a part of the output), cost rounded up, reservations at the top
rate."""

from __future__ import annotations

from agentctl.core.pricing import cost_microusd, max_cost_microusd, price_for

PRICING = {
    "version": "2026-01",
    "models": {
        "main/m": {"inputMicrousdPerMillionTokens": 3, "outputMicrousdPerMillionTokens": 7},
        "openai/big": {
            "inputMicrousdPerMillionTokens": 2_000_000,
            "outputMicrousdPerMillionTokens": 8_000_000,
            "cacheReadMicrousdPerMillionTokens": 500_000,
        },
    },
}


def test_rates_default_reasoning_to_output_and_cache_to_input() -> None:
    rates = price_for(PRICING, "main", "openai", "m")
    assert rates == {
        "inputTokens": 3,
        "outputTokens": 7,
        "reasoningTokens": 7,
        "cacheReadTokens": 3,
        "cacheWriteTokens": 3,
    }


def test_a_provider_name_wins_and_the_kind_is_the_fallback() -> None:
    assert price_for(PRICING, "other", "openai", "big") is not None
    assert price_for(PRICING, "main", "anthropic", "big") is None
    assert price_for(None, "main", "openai", "m") is None


def test_cost_is_rounded_up_to_a_whole_micro_usd() -> None:
    rates = price_for(PRICING, "main", "fake", "m")
    assert rates is not None
    assert cost_microusd(rates, {"inputTokens": 1}) == 1  # 3e-6 µUSD still costs one
    big = price_for(PRICING, "x", "openai", "big")
    assert big is not None
    usage = {"inputTokens": 1000, "outputTokens": 500, "cacheReadTokens": 200}
    # 800 uncached input at 2, the 200 cached at 0.5, 500 output at 8 micro-USD a token.
    assert cost_microusd(big, usage) == 1600 + 100 + 4000


# Every kind at its own rate (micro-USD per token, times a million per million tokens).
EVERY_RATE = {
    "inputTokens": 3_000_000,
    "outputTokens": 5_000_000,
    "reasoningTokens": 7_000_000,
    "cacheReadTokens": 1_000_000,
    "cacheWriteTokens": 2_000_000,
}


def test_each_token_is_billed_once_at_its_kinds_rate() -> None:
    usage = {"inputTokens": 100, "cacheReadTokens": 60, "cacheWriteTokens": 10}
    usage |= {"outputTokens": 40, "reasoningTokens": 25}
    # 30 plain input, 60 read, 10 written; 15 plain output, 25 reasoning.
    assert cost_microusd(EVERY_RATE, usage) == 30 * 3 + 60 * 1 + 10 * 2 + 15 * 5 + 25 * 7


def test_a_part_larger_than_its_whole_is_cut_to_the_whole() -> None:
    # A buggy server: 50 read and 30 written of 40 input, 9 reasoning of 4 output.
    usage = {"inputTokens": 40, "cacheReadTokens": 50, "cacheWriteTokens": 30}
    usage |= {"outputTokens": 4, "reasoningTokens": 9}
    # All 40 input billed as cache reads (none written, none plain), all 4 output as reasoning.
    assert cost_microusd(EVERY_RATE, usage) == 40 * 1 + 4 * 7
    assert cost_microusd(EVERY_RATE, {"cacheReadTokens": 5, "reasoningTokens": 5}) == 0


def test_a_reservation_prices_every_token_at_the_highest_rate() -> None:
    big = price_for(PRICING, "x", "openai", "big")
    assert big is not None
    assert max_cost_microusd(big, 1500) == 12000
    assert max_cost_microusd(big, 1500) >= cost_microusd(
        big, {"inputTokens": 1000, "outputTokens": 500}
    )
    # The parts are inside the input and output: the bound holds with them too.
    usage = {"inputTokens": 100, "outputTokens": 40, "reasoningTokens": 40}
    usage |= {"cacheReadTokens": 100, "cacheWriteTokens": 100}
    assert cost_microusd(EVERY_RATE, usage) == 100 * 1 + 40 * 7
    assert max_cost_microusd(EVERY_RATE, 140) == 140 * 7 >= cost_microusd(EVERY_RATE, usage)
