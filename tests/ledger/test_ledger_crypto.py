"""Column encryption on a real ledger file: what is sealed, that no writer slips plaintext
past the triggers, that envelopes stay bound to their column, and that the documented column
list is the one the code seals (docs/encryption.md)."""

from __future__ import annotations

import base64
import dataclasses
import os
import re
import sqlite3
from pathlib import Path

import pytest
from ledger_helpers import make_run, new_run, ts

from agentctl.core.canonical import canonical_json
from agentctl.errors import PersistenceError
from agentctl.ledger.connection import Database, open_database
from agentctl.ledger.crypto import PREFIX, SENSITIVE
from agentctl.ledger.encryption import EncryptionChange, change_encryption, inventory
from agentctl.ledger.runs import create_run_txn, get_run

pytestmark = pytest.mark.sqlite_only  # column encryption is SQLite triggers

DOC = Path(__file__).resolve().parents[2] / "docs" / "encryption.md"
KEY_ENV = "AGENTCTL_TEST_LEDGER_KEY"


@pytest.fixture
def sealed(ledger: Database, monkeypatch: pytest.MonkeyPatch) -> Database:
    """The ledger with one run, encrypted under key ``k1``."""
    monkeypatch.setenv(KEY_ENV, base64.b64encode(os.urandom(32)).decode())
    make_run(ledger, "run-1")
    change_encryption(ledger, EncryptionChange("enable", "k1", KEY_ENV, ts(1)))
    return ledger


def _raw(db_path: Path) -> sqlite3.Connection:
    """A writer without the key: the sqlite3 module itself, as any other program would be."""
    return sqlite3.connect(db_path, isolation_level=None)


def _stored(db_path: Path, sql: str) -> str:
    conn = _raw(db_path)
    try:
        return str(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


def test_existing_and_new_values_are_stored_sealed_and_read_plain(
    sealed: Database, db_path: Path
) -> None:
    assert _stored(db_path, "SELECT inputs_json FROM runs").startswith(f"{PREFIX}k1:")
    with sealed.transaction() as conn:  # any statement, not just the ledger's own modules
        conn.execute('UPDATE runs SET output_json = \'{"token":"sk-abc"}\'')
        conn.execute(
            "INSERT INTO long_term_memory (namespace, key, value_json, text, created_at,"
            " updated_at) VALUES ('ns', 'k', '\"sk-def\"', 'sk-def', ?, ?)",
            (ts(2), ts(2)),
        )
    assert _stored(db_path, "SELECT output_json FROM runs").startswith(f"{PREFIX}k1:")
    assert _stored(db_path, "SELECT text FROM long_term_memory").startswith(f"{PREFIX}k1:")
    with sealed.read() as conn:
        assert get_run(conn, "run-1").output == {"token": "sk-abc"}
        assert conn.execute("SELECT text FROM long_term_memory").fetchone()[0] == "sk-def"
        counts = inventory(conn).columns
    assert all(c.plaintext == 0 for c in counts)


def test_an_encrypted_ledger_keeps_a_runs_plan_sealed_inline(
    sealed: Database, db_path: Path
) -> None:
    """Its plan is not cut into ``run_plan_parts`` (a ledger encrypted before schema v15 has no
    seal triggers there): it is sealed in ``run_documents`` and reads back whole."""
    plan = canonical_json({"tasks": [{"id": f"t{i}", "secret": "sk-abc"} for i in range(9000)]})
    run = dataclasses.replace(new_run("run-2"), compiled_plan_json=plan)
    with sealed.transaction() as conn:
        create_run_txn(conn, run, ["a"], ts(2))
    stored = _stored(db_path, "SELECT compiled_plan_json FROM run_documents WHERE run_id='run-2'")
    assert stored.startswith(f"{PREFIX}k1:")
    assert _stored(db_path, "SELECT count(*) FROM run_plan_parts") == "0"
    with sealed.read() as conn:
        assert get_run(conn, "run-2").compiled_plan_json == plan


def test_enabling_encryption_seals_the_plan_parts_of_earlier_runs(
    ledger: Database, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = canonical_json({"tasks": [{"id": f"t{i}", "secret": "sk-abc"} for i in range(9000)]})
    with ledger.transaction() as conn:
        run = dataclasses.replace(new_run("run-1"), compiled_plan_json=plan)
        create_run_txn(conn, run, ["a"], ts(1))
    monkeypatch.setenv(KEY_ENV, base64.b64encode(os.urandom(32)).decode())
    change_encryption(ledger, EncryptionChange("enable", "k1", KEY_ENV, ts(2)))
    raw = _raw(db_path)
    try:
        parts = [str(r[0]) for r in raw.execute("SELECT plan_text FROM run_plan_parts")]
    finally:
        raw.close()
    assert len(parts) > 1 and all(p.startswith(f"{PREFIX}k1:") for p in parts)
    with ledger.read() as conn:
        assert get_run(conn, "run-1").compiled_plan_json == plan


def test_every_sensitive_table_is_guarded(sealed: Database) -> None:
    with sealed.read() as conn:
        names = {
            str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        }
    for table in SENSITIVE:
        for kind in ("stale_insert", "stale_update", "seal_insert", "seal_update"):
            assert f"agentctl_crypt_{table}_{kind}" in names


def test_a_writer_without_the_key_cannot_write_a_sensitive_column(
    sealed: Database, db_path: Path
) -> None:
    before = _stored(db_path, "SELECT output_json FROM runs")
    conn = _raw(db_path)
    try:
        with pytest.raises(sqlite3.OperationalError, match="agentctl_seal"):
            conn.execute("UPDATE runs SET output_json = '{\"leak\":1}'")
        conn.execute("UPDATE runs SET state = 'failed'")  # plaintext columns stay writable
    finally:
        conn.close()
    assert _stored(db_path, "SELECT output_json FROM runs") == before


def test_a_connection_opened_before_enable_gets_a_clear_refusal(
    ledger: Database, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_run(ledger, "run-1")
    earlier = open_database(db_path)  # another process's connection, opened in plaintext
    try:
        monkeypatch.setenv(KEY_ENV, base64.b64encode(os.urandom(32)).decode())
        change_encryption(ledger, EncryptionChange("enable", "k1", KEY_ENV, ts(1)))
        before = _stored(db_path, "SELECT output_json FROM runs")
        refused = pytest.raises(PersistenceError, match="encrypted after this process opened it")
        with refused, earlier.transaction() as tx:
            tx.execute("UPDATE runs SET output_json = '{\"late\":1}'")
    finally:
        earlier.close()
    assert _stored(db_path, "SELECT output_json FROM runs") == before


def test_an_envelope_under_another_key_is_refused(sealed: Database, db_path: Path) -> None:
    stale = f"{PREFIX}k0:AAAA"
    with pytest.raises(PersistenceError, match="another key"), sealed.transaction() as tx:
        tx.execute("UPDATE runs SET reason = ?", (stale,))
    with pytest.raises(PersistenceError, match="another key"), sealed.transaction() as tx:
        tx.execute(
            "INSERT INTO long_term_memory (namespace, key, value_json, created_at, updated_at)"
            " VALUES ('ns', 'k', ?, ?, ?)",
            (stale, ts(2), ts(2)),
        )
    assert _stored(db_path, "SELECT count(*) FROM long_term_memory") == "0"


def test_a_value_moved_to_another_column_does_not_open(sealed: Database) -> None:
    # An envelope under the database's key passes the triggers: the associated data catches it.
    with sealed.transaction() as tx:
        tx.execute("UPDATE runs SET output_json = inputs_json")
    with pytest.raises(PersistenceError, match="moved"), sealed.read() as tx:
        get_run(tx, "run-1")


def test_opening_needs_the_recorded_key(
    sealed: Database, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sealed.close()
    monkeypatch.setenv(KEY_ENV, base64.b64encode(os.urandom(32)).decode())
    with pytest.raises(PersistenceError, match="wrong key"):
        open_database(db_path)
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(PersistenceError, match=f"'k1'.*{KEY_ENV}"):
        open_database(db_path)


def _documented(section: str) -> dict[str, set[str]]:
    """``{table: columns}`` from one table of docs/encryption.md (rows ``| `t` | `c`, … |``)."""
    text = DOC.read_text(encoding="utf-8").split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    found: dict[str, set[str]] = {}
    for table, cells in re.findall(r"^\| `(\w+)` \| ((?:`\w+`(?:, )?)+) \|", text, re.M):
        found[table] = set(re.findall(r"`(\w+)`", cells))
    return found


def test_the_documented_columns_are_the_sealed_ones_and_cover_the_schema(
    ledger: Database,
) -> None:
    assert _documented("What is encrypted") == {t: set(cs) for t, cs in SENSITIVE.items()}
    plain = _documented("What stays in plaintext")
    with ledger.read() as conn:
        tables = [
            str(r[0])
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        for table in tables:
            text = {
                str(r[1])
                for r in conn.execute(f'PRAGMA table_info("{table}")')
                if str(r[2]).upper() == "TEXT"
            }
            # Every text column is decided: sealed, or plaintext for a stated reason.
            assert text == set(SENSITIVE.get(table, ())) | plain.get(table, set()), table


def test_a_failed_rotate_leaves_everything_under_the_old_key(
    sealed: Database, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with sealed.transaction() as tx:  # a damaged value under the current key id
        tx.execute(f"UPDATE runs SET reason = '{PREFIX}k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAA'")
    before = _stored(db_path, "SELECT inputs_json FROM runs")
    monkeypatch.setenv("AGENTCTL_TEST_LEDGER_KEY_2", base64.b64encode(os.urandom(32)).decode())
    rotate = EncryptionChange("rotate", "k2", "AGENTCTL_TEST_LEDGER_KEY_2", ts(3))
    with pytest.raises(PersistenceError, match=r"runs\.reason"):
        change_encryption(sealed, rotate)
    assert _stored(db_path, "SELECT inputs_json FROM runs") == before
    assert _stored(db_path, "SELECT key_id FROM state_encryption") == "k1"
    with sealed.read() as tx:  # still readable under k1 on the same connection
        assert tx.execute("SELECT inputs_json FROM runs").fetchone()[0] == '{"x":1}'
        assert {c.column: c.encrypted for c in inventory(tx).columns}["inputs_json"] == {"k1": 1}


def test_enable_refuses_values_sealed_under_an_unknown_key(
    ledger: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_run(ledger, "run-1")
    with ledger.transaction() as tx:  # no triggers yet: a stray envelope gets in
        tx.execute(f"UPDATE runs SET reason = '{PREFIX}k0:AAAA'")
    monkeypatch.setenv(KEY_ENV, base64.b64encode(os.urandom(32)).decode())
    with pytest.raises(PersistenceError, match="'k0'"):
        change_encryption(ledger, EncryptionChange("enable", "k1", KEY_ENV, ts(1)))
    with ledger.read() as tx:
        assert inventory(tx).key_id is None
        assert tx.execute("SELECT inputs_json FROM runs").fetchone()[0] == '{"x":1}'


def test_large_values_stay_inline_and_gc_sees_through_envelopes(
    ledger: Database, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_ledger_values import BIG, _digest, _record_write

    from agentctl.ledger.artifacts.store import blob_file, open_artifact_store
    from agentctl.ledger.artifacts.values import dumps_value
    from agentctl.ledger.housekeeping import collect_garbage

    _record_write(ledger, {"content": BIG}, {"after": BIG})  # spilled to a value blob
    monkeypatch.setenv(KEY_ENV, base64.b64encode(os.urandom(32)).decode())
    change_encryption(ledger, EncryptionChange("enable", "k1", KEY_ENV, ts(9)))
    later = "z" * len(BIG)
    with ledger.transaction() as tx:  # a large value written once encrypted: kept in its row
        tx.execute("UPDATE runs SET output_json = ?", (dumps_value(tx, later, ts(10)),))
    assert not blob_file(db_path.parent / "artifacts", _digest(later)).exists()
    with ledger.read() as tx:
        assert get_run(tx, "run-1").output == later
    store = open_artifact_store(ledger)
    soon = "2024-05-02T12:00:00.000Z"  # the run is too recent to collect
    kept = collect_garbage(store, soon, older_than_days=30, dry_run=False)
    # The encrypted rows still name the old blob, and gc can read them: it stays pinned.
    assert kept.removed.value_blobs == 0 and not kept.removed.value_blobs_kept_encrypted
    later_on = "2024-07-01T12:00:00.000Z"
    freed = collect_garbage(store, later_on, older_than_days=30, dry_run=False)
    assert freed.removed.runs == ("run-1",) and freed.removed.value_blobs == 1
