"""Redaction of resolved secrets and sensitive keys (spec/cli.md §12)."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentctl.core.redact import REDACTED, PieceRedaction, Redactor, is_sensitive_key, redact


def test_secret_values_are_redacted_everywhere() -> None:
    value = {
        "stdout": "key=sk-live-123 and again sk-live-123",
        "nested": [{"msg": "prefix sk-live-123suffix"}, "sk-live-123", 7, None, True],
        "tuple": ("sk-live-123",),
    }
    assert redact(value, ["sk-live-123"]) == {
        "stdout": f"key={REDACTED} and again {REDACTED}",
        "nested": [{"msg": f"prefix {REDACTED}suffix"}, REDACTED, 7, None, True],
        "tuple": [REDACTED],
    }


@pytest.mark.parametrize(
    "key",
    [
        "authorization",
        "Authorization",
        "api_key",
        "API-KEY",
        "apikey",
        "x-api-key",
        "token",
        "accessToken",
        "client_secret",
        "SECRET",
        "password",
        "db_password",
    ],
)
def test_sensitive_keys_are_replaced_whole(key: str) -> None:
    assert is_sensitive_key(key)
    assert redact({key: {"any": "shape"}, "other": "kept"}) == {key: REDACTED, "other": "kept"}


@pytest.mark.parametrize(
    "key",
    [
        "inputTokens",
        "maxOutputTokens",
        "total_tokens",
        "secretFileRoots",
        "secrets",
        "tokenizer",
        "passwordPolicy",
        "name",
    ],
)
def test_usage_and_policy_keys_survive(key: str) -> None:
    # A substring match would wreck usage and budget records; we match name suffixes.
    assert not is_sensitive_key(key)
    assert redact({key: 12}) == {key: 12}


def test_short_secrets_are_still_redacted() -> None:
    assert Redactor(["ab"]).redact_text("cab and abc") == f"c{REDACTED} and {REDACTED}c"
    assert Redactor(["x"]).redact_text("xx") == REDACTED * 2


def test_empty_secret_is_ignored_and_no_secrets_is_identity() -> None:
    assert Redactor([""]).redact_text("abc") == "abc"
    assert Redactor().redact({"a": ["b"]}) == {"a": ["b"]}


def test_longer_secret_wins_over_a_contained_one() -> None:
    redactor = Redactor(["abc", "abcdef"])
    assert redactor.redact_text("xabcdefx abc") == f"x{REDACTED}x {REDACTED}"


def test_regex_characters_in_secrets_are_literal() -> None:
    assert Redactor(["a.c"]).redact_text("abc a.c") == f"abc {REDACTED}"


def test_input_is_not_mutated_and_keys_are_kept() -> None:
    value = {"s3cr3t-key": ["s3cr3t"], "token": "x"}
    before = copy.deepcopy(value)
    assert redact(value, ["s3cr3t"]) == {"s3cr3t-key": [REDACTED], "token": REDACTED}
    assert value == before


ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789 "


@given(
    st.text(alphabet="abcxyz0123", min_size=1, max_size=6),
    st.recursive(
        st.text(alphabet=ALPHABET, max_size=8) | st.integers(),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3)
        ),
        max_leaves=8,
    ),
)
def test_no_secret_survives_redaction(secret: str, value: Any) -> None:
    # Embed the secret into every string, then check no string still contains it.
    def embed(v: Any) -> Any:
        if isinstance(v, str):
            return v + secret + v
        if isinstance(v, list):
            return [embed(i) for i in v]
        if isinstance(v, dict):
            return {k: embed(i) for k, i in v.items()}
        return v

    def strings(v: Any) -> list[str]:
        if isinstance(v, str):
            return [v]
        if isinstance(v, list):
            return [s for i in v for s in strings(i)]
        if isinstance(v, dict):
            return [s for i in v.values() for s in strings(i)]
        return []

    for text in strings(redact(embed(value), [secret])):
        assert secret not in text


def test_a_secret_is_hidden_in_the_escaped_forms_an_error_may_quote() -> None:
    """An HTTP library refusing a header quotes it as bytes (``\\r`` escaped); JSON text
    escapes line breaks and non-ASCII: each spelling of the secret is hidden."""
    r = Redactor(["sk-abc\r", "pé\n"])
    quoted = "Illegal header value b'Bearer sk-abc\\r'; p\\xc3\\xa9\\n, \"p\\u00e9\\n\", pé\n"
    assert r.redact_text(quoted) == (
        "Illegal header value b'Bearer [REDACTED]'; [REDACTED], \"[REDACTED]\", [REDACTED]"
    )


@given(st.lists(st.integers(min_value=0, max_value=40), max_size=6))
def test_a_secret_split_into_any_pieces_is_redacted_whole(cuts: list[int]) -> None:
    secret = "sk-live-0123456789abcdef"
    text = f"before {secret} between {secret}after"
    bounds = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    redaction = PieceRedaction(Redactor([secret]))
    shown = [redaction.piece("text", p) for p in pieces]
    shown += list(redaction.flush().values())
    assert "".join(shown) == f"before {REDACTED} between {REDACTED}after"
    assert all("sk-live-0" not in s for s in shown)


def test_pieces_of_different_kinds_are_held_apart() -> None:
    redaction = PieceRedaction(Redactor(["tok-12345"]))
    assert redaction.piece("text", "a tok-") == "a "
    assert redaction.piece("reasoning", "tok-12") == ""
    assert redaction.piece("text", "12345!") == f"{REDACTED}!"
    assert redaction.flush() == {"reasoning": "tok-12"}
