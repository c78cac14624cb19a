"""The pure part of long-term memory: entries, the local_hash embedding and search ranking."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentctl.core.longterm import (
    Candidate,
    EmbeddingIdentity,
    SearchQuery,
    entry_from_args,
    local_hash,
    rank,
    search_query_of,
    tokens,
)
from agentctl.core.longterm.embedding import cosine
from agentctl.errors import PersistenceError, ValidationError

ID = EmbeddingIdentity()


def _candidate(key: str, text: str, identity: EmbeddingIdentity = ID, **meta: str) -> Candidate:
    return Candidate(key, text, text, dict(meta), identity, local_hash(text, identity))


@given(st.text(max_size=200))
def test_local_hash_is_a_unit_or_zero_vector_of_the_identity_size(text: str) -> None:
    vector = local_hash(text, ID)
    assert len(vector) == ID.dimensions
    length = math.sqrt(sum(x * x for x in vector))
    assert (length == 0.0) == (not tokens(text))
    assert length == 0.0 or abs(length - 1.0) < 1e-6
    assert local_hash(text, ID) == vector  # no hidden state


def test_local_hash_is_lexical_case_and_width_insensitive_and_salted_by_model() -> None:
    assert local_hash("Release NOTES", ID) == local_hash("release notes", ID)
    assert local_hash("ｒｅｌｅａｓｅ", ID) == local_hash("release", ID)  # NFKC
    near = cosine(local_hash("deployments", ID), local_hash("deployment window", ID))
    far = cosine(local_hash("deployments", ID), local_hash("coffee beans", ID))
    assert near > far
    other = EmbeddingIdentity(model="another-space")
    assert local_hash("release", other) != local_hash("release", ID)
    with pytest.raises(ValueError, match="dimensions"):
        local_hash("x", EmbeddingIdentity(dimensions=4))


def test_entries_from_each_written_form() -> None:
    typed = entry_from_args({"content": {"type": "text", "text": "hi there"}})
    assert (typed.value, typed.text) == ("hi there", "hi there")
    as_json = entry_from_args({"content": {"type": "json", "value": {"a": 1}}, "metadata": {}})
    assert as_json.value == {"a": 1} and as_json.text == '{"a":1}'
    plain = entry_from_args({"value": [1, "x"], "text": "list", "metadata": {"t": True}})
    assert (plain.text, plain.metadata) == ("list", {"t": True})
    for bad in (
        {"value": 1, "content": {"type": "text", "text": "x"}},
        {"content": {"type": "xml"}},
        {"content": {"type": "text"}},
        {"metadata": [1]},
        {"text": 3},
        {"value": "x" * 1_100_000},
    ):
        with pytest.raises(ValidationError):
            entry_from_args(bad)


def test_search_arguments_are_validated() -> None:
    assert search_query_of({"text": "q"}, "ns") == SearchQuery("ns", "q")
    for bad in (
        {"query": "q", "text": "q"},
        {"query": 1},
        {"query": "q", "mode": "fuzzy"},
        {"query": "q", "limit": 0},
        {"query": "q", "limit": True},
        {"query": "q", "filters": [1]},
    ):
        with pytest.raises(ValidationError):
            search_query_of(bad, "ns")


def test_text_ranking_orders_by_score_then_key_and_cuts_at_limit() -> None:
    found = [
        _candidate("b", "release notes"),
        _candidate("a", "release train"),
        _candidate("c", "notes only"),
        _candidate("d", "nothing shared"),
    ]
    results = rank(SearchQuery("ns", "release notes", limit=3), found, ID)
    assert [(r["key"], r["score"]) for r in results] == [
        ("b", 1_000_000),
        ("a", 500_000),
        ("c", 500_000),
    ]
    assert rank(SearchQuery("ns", "release notes", limit=1), found, ID)[0]["key"] == "b"


def test_filters_compare_json_values_exactly() -> None:
    found = [
        Candidate("n", "v", "word", {"level": 2}, ID, local_hash("word", ID)),
        Candidate("s", "v", "word", {"level": "2"}, ID, local_hash("word", ID)),
        Candidate("b", "v", "word", {"level": True}, ID, local_hash("word", ID)),
    ]
    for wanted, key in ((2, "n"), ("2", "s"), (True, "b")):
        results = rank(SearchQuery("ns", "word", filters={"level": wanted}), found, ID)
        assert [r["key"] for r in results] == [key]


def test_vector_and_hybrid_modes_fail_closed_on_another_index() -> None:
    mixed = [_candidate("a", "alpha"), _candidate("b", "alpha", EmbeddingIdentity(dimensions=32))]
    assert [r["key"] for r in rank(SearchQuery("ns", "alpha"), mixed, ID)] == ["a", "b"]
    for mode in ("vector", "hybrid"):
        with pytest.raises(PersistenceError, match="reindex ns --dimensions 64"):
            rank(SearchQuery("ns", "alpha", mode=mode), mixed, ID)


def test_hybrid_is_the_mean_of_text_and_vector() -> None:
    found = [_candidate("a", "release notes for the deployment")]
    scores = {
        mode: rank(SearchQuery("ns", "release deploy", mode=mode), found, ID)[0]["score"]
        for mode in ("text", "vector", "hybrid")
    }
    assert abs(scores["hybrid"] - (scores["text"] + scores["vector"]) / 2) <= 1
