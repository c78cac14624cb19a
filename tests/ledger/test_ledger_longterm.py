"""The long_term_memory table: entries with expiry, candidates for search, reindexing, and the
migration that made pre-search entries searchable."""

from __future__ import annotations

from pathlib import Path

import pytest
from ledger_helpers import T0, ts

from agentctl.core.jsonvalue import JsonValue
from agentctl.core.longterm import EmbeddingIdentity, Entry, SearchQuery, local_hash, rank
from agentctl.errors import PersistenceError, ValidationError
from agentctl.ledger import MemoryPut
from agentctl.ledger import longterm as lt
from agentctl.ledger.connection import Database, open_database
from agentctl.ledger.migrations import MIGRATIONS, _long_term_search_index

ID64 = EmbeddingIdentity()


def _put(key: str, text: str, *, days: int | None = None, **metadata: str) -> MemoryPut:
    entry = Entry({"k": key}, text, dict[str, JsonValue](metadata))
    return MemoryPut("ns", key, entry, ID64, local_hash(text, ID64), days)


def test_entries_expire_from_their_write_time(ledger: Database) -> None:
    with ledger.transaction() as conn:
        lt.put_txn(conn, _put("keep", "kept"), ts(1))
        lt.put_txn(conn, _put("tmp", "short lived", days=1), ts(1))
    with ledger.read() as conn:
        tmp = lt.get_entry(conn, "ns", "tmp", ts(2))
        assert tmp.found and tmp.expires_at == "2024-05-02T12:00:01.000Z"
        later = "2024-05-02T12:00:01.000Z"
        assert not lt.get_entry(conn, "ns", "tmp", later).found
        assert [c.key for c in lt.candidates(conn, "ns", later)] == ["keep"]
        assert not lt.get_entry(conn, "other", "keep", ts(2)).found
    with ledger.transaction() as conn:
        assert lt.delete_expired_txn(conn, later) == 1


def test_a_rewrite_replaces_value_text_metadata_and_vector(ledger: Database) -> None:
    with ledger.transaction() as conn:
        lt.put_txn(conn, _put("k", "first text", team="a"), ts(1))
        lt.put_txn(conn, _put("k", "second text", team="b"), ts(2))
    with ledger.read() as conn:
        (only,) = lt.candidates(conn, "ns", ts(3))
    assert (only.text, only.metadata) == ("second text", {"team": "b"})
    assert only.vector == local_hash("second text", ID64)
    with ledger.read() as conn:
        entry = lt.get_entry(conn=conn, namespace="ns", key="k", now=ts(3))
    assert (entry.created_at, entry.updated_at) == (ts(1), ts(2))


def test_reindex_rebuilds_vectors_for_another_identity(ledger: Database) -> None:
    wide = EmbeddingIdentity(dimensions=128)
    with ledger.transaction() as conn:
        lt.put_txn(conn, _put("a", "release notes"), ts(1))
    query = SearchQuery("ns", "release", mode="vector")
    with (
        ledger.read() as conn,
        pytest.raises(PersistenceError, match="memory reindex ns --dimensions 128"),
    ):
        rank(query, lt.candidates(conn, "ns", ts(2)), wide)
    with ledger.transaction() as conn:
        assert lt.reindex_txn(conn, "ns", wide, ts(2)) == 1
    with ledger.read() as conn:
        (result,) = rank(query, lt.candidates(conn, "ns", ts(3)), wide)
    assert result["key"] == "a"


def test_a_corrupt_vector_is_refused(ledger: Database) -> None:
    with ledger.transaction() as conn:
        lt.put_txn(conn, _put("a", "x"), ts(1))
        conn.execute("UPDATE long_term_memory SET vector_json = '[1, 2]'")
    with ledger.read() as conn, pytest.raises(PersistenceError, match="corrupt vector"):
        lt.candidates(conn, "ns", ts(2))


def test_a_search_never_silently_cuts_a_large_namespace(
    ledger: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lt, "MAX_CANDIDATES", 2)
    with ledger.transaction() as conn:
        for key in ("a", "b", "c"):
            lt.put_txn(conn, _put(key, key), ts(1))
    with ledger.read() as conn, pytest.raises(ValidationError, match="more than 2"):
        lt.candidates(conn, "ns", ts(2))


def test_pre_search_entries_get_derived_text_and_stay_unindexed(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    # The version just before the step that added search columns.
    before_search = MIGRATIONS.index(_long_term_search_index())
    old = open_database(db, target_version=before_search)
    with old.transaction() as conn:
        for key, value in (("s", '"plain words"'), ("o", '{"a":1}')):
            conn.execute(
                "INSERT INTO long_term_memory (namespace, key, value_json, created_at,"
                " updated_at) VALUES ('ns', ?, ?, ?, ?)",
                (key, value, T0, T0),
            )
    old.close()
    led = open_database(db)
    try:
        with led.read() as conn:
            found = {c.key: c for c in lt.candidates(conn, "ns", ts(1))}
        assert found["s"].text == "plain words" and found["o"].text == '{"a":1}'
        assert found["s"].embedding is None and found["s"].metadata == {}
        assert rank(SearchQuery("ns", "words"), found.values(), ID64)[0]["key"] == "s"
        with pytest.raises(PersistenceError, match="no embedding"):
            rank(SearchQuery("ns", "words", mode="hybrid"), found.values(), ID64)
    finally:
        led.close()
