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


def test_input_is_not_mutated_and_keys_without_a_secret_are_kept() -> None:
    value = {"s3cr3t-key": ["s3cr3t"], "token": "x", "plain": {"inner": 1}}
    before = copy.deepcopy(value)
    assert redact(value, ["s3cr3t"]) == {
        f"{REDACTED}-key": [REDACTED],
        "token": REDACTED,
        "plain": {"inner": 1},
    }
    assert value == before


def test_a_secret_used_as_a_key_is_redacted_at_any_depth() -> None:
    """An extension or a model may answer with the secret as a key: it is hidden there as in
    a value (the audit's ``{"value": tok, tok: "key"}``)."""
    tok = "hunter2-secret-value"
    value = {"value": tok, tok: "key", "deep": [{f"x-{tok}-y": {tok: tok}}]}
    assert redact(value, [tok]) == {
        "value": REDACTED,
        REDACTED: "key",
        "deep": [{f"x-{REDACTED}-y": {REDACTED: REDACTED}}],
    }


def test_keys_equal_once_redacted_keep_every_value_in_order() -> None:
    """No member is dropped: a key no secret occurred in keeps its name; each redacted key, in
    the object's order, takes the first free one of ``K``, ``K#2``, ``K#3``."""
    redactor = Redactor(["s1-hidden", "s2-hidden"])
    assert list(redactor.redact({"a-s1-hidden": 1, "a-s2-hidden": 2}).items()) == [
        (f"a-{REDACTED}", 1),
        (f"a-{REDACTED}#2", 2),
    ]
    # A key already spelled as a redacted one is the author's: it keeps its name.
    clash = {"s1-hidden": 1, REDACTED: 2, f"{REDACTED}#2": 3, "s2-hidden": 4}
    assert list(redactor.redact(clash).items()) == [
        (f"{REDACTED}#3", 1),
        (REDACTED, 2),
        (f"{REDACTED}#2", 3),
        (f"{REDACTED}#4", 4),
    ]


def test_a_sensitive_key_is_judged_as_given_and_redacted_too() -> None:
    assert redact({"s3cr3t_token": {"a": 1}}, ["s3cr3t"]) == {f"{REDACTED}_token": REDACTED}


@pytest.mark.parametrize("blank", ["", " ", "  ", "\t", " \n ", "\u00a0"])
def test_an_empty_or_whitespace_secret_is_never_redacted(blank: str) -> None:
    """It would garble every message (``provider[REDACTED]main``); no such value is used as a
    credential or header (``coordinator.secrets`` refuses it)."""
    redactor = Redactor([blank, "sk-1"])
    assert redactor.redact_text("provider main: sk-1 was\trefused") == (
        f"provider main: {REDACTED} was\trefused"
    )
    assert redactor.redact({"a b": " "}) == {"a b": " "}
    assert redactor.held_back("ends with a space ") == 0


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
            return [*v, *(s for i in v.values() for s in strings(i))]
        return []

    def members(v: Any) -> int:
        if isinstance(v, list):
            return sum(members(i) for i in v)
        if isinstance(v, dict):
            return len(v) + sum(members(i) for i in v.values())
        return 0

    def with_keys(v: Any) -> Any:  # the secret in every key too, and a key made of it
        if isinstance(v, list):
            return [with_keys(i) for i in v]
        if isinstance(v, dict):
            keyed = {k + secret: with_keys(i) for k, i in v.items()}
            return {**keyed, secret: 0} if v else keyed
        return v

    embedded = with_keys(embed(value))
    redacted = redact(embedded, [secret])
    for text in strings(redacted):
        assert secret not in text
    assert members(redacted) == members(embedded)  # no member lost to a key collision


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
