"""runtime.pricing: rates with their defaults, cost rounded up, reservations at the top rate."""

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
    assert cost_microusd(big, usage) == 2000 + 4000 + 100


def test_a_reservation_prices_every_token_at_the_highest_rate() -> None:
    big = price_for(PRICING, "x", "openai", "big")
    assert big is not None
    assert max_cost_microusd(big, 1500) == 12000
    assert max_cost_microusd(big, 1500) >= cost_microusd(
        big, {"inputTokens": 1000, "outputTokens": 500}
    )
