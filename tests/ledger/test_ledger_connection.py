"""open_database: pragmas, file modes, future versions, lock timeout, error translation."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest
from ledger_helpers import T0, make_run

from agentctl.errors import FutureVersionError, LockTimeoutError, PersistenceError
from agentctl.ledger import SUPPORTED_SCHEMA_VERSION
from agentctl.ledger.connection import Database, open_database
from agentctl.ledger.runs import get_run


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.sqlite_only
def test_open_creates_parents_and_sets_pragmas(ledger: Database, db_path: Path) -> None:
    assert db_path.parent.is_dir()
    conn = ledger.conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SUPPORTED_SCHEMA_VERSION


@pytest.mark.sqlite_only
def test_database_and_wal_files_are_private(ledger: Database, db_path: Path) -> None:
    make_run(ledger)
    companions = [Path(f"{db_path}-wal"), Path(f"{db_path}-shm")]
    assert all(p.exists() for p in companions)
    for path in (db_path, *companions):
        assert _mode(path) == 0o600, path


def test_future_schema_is_refused_without_touching_the_file(tmp_path: Path) -> None:
    db = tmp_path / "future.db"
    raw = sqlite3.connect(db)
    raw.execute("CREATE TABLE t (x)")
    raw.execute(f"PRAGMA user_version = {SUPPORTED_SCHEMA_VERSION + 1}")
    raw.commit()
    raw.close()
    before = db.read_bytes()
    with pytest.raises(FutureVersionError) as info:
        open_database(db)
    assert info.value.exit_code == 5
    assert str(SUPPORTED_SCHEMA_VERSION + 1) in info.value.message
    assert str(SUPPORTED_SCHEMA_VERSION) in info.value.message
    assert db.read_bytes() == before
    assert not Path(f"{db}-wal").exists()
    assert not Path(f"{db}-shm").exists()


def test_future_schema_in_a_wal_database_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "future-wal.db"
    open_database(db).close()
    raw = sqlite3.connect(db)
    raw.execute(f"PRAGMA user_version = {SUPPORTED_SCHEMA_VERSION + 1}")
    raw.commit()
    raw.close()
    with pytest.raises(FutureVersionError):
        open_database(db)


def test_future_row_format_is_refused(ledger: Database) -> None:
    make_run(ledger)
    ledger.conn.execute("UPDATE runs SET format_version = 2")
    with pytest.raises(FutureVersionError, match="newer than supported 1"), ledger.read() as c:
        get_run(c, "run-1")


def test_lock_held_beyond_busy_timeout_raises_lock_timeout(db_path: Path) -> None:
    holder = open_database(db_path)
    waiter = open_database(db_path, busy_timeout_ms=50)
    try:
        with holder.transaction():
            with pytest.raises(LockTimeoutError) as info, waiter.transaction():
                pass
            assert info.value.exit_code == 5
    finally:
        holder.close()
        waiter.close()


@pytest.mark.sqlite_only
def test_sqlite_errors_are_translated_and_rolled_back(ledger: Database) -> None:
    make_run(ledger)
    with pytest.raises(PersistenceError, match="database error"):
        make_run(ledger)  # duplicate run id
    assert ledger.conn.execute("SELECT COUNT(*) FROM audit_events").fetchone()[0] == 1
    assert not ledger.conn.in_transaction


def test_garbage_file_is_a_persistence_error(tmp_path: Path) -> None:
    db = tmp_path / "junk.db"
    db.write_bytes(b"not a database at all" * 20)
    with pytest.raises(PersistenceError):
        open_database(db)


def test_read_sees_committed_writes_of_another_connection(db_path: Path) -> None:
    a, b = open_database(db_path), open_database(db_path)
    try:
        make_run(a, now=T0)
        with b.read() as conn:
            assert get_run(conn, "run-1").state == "running"
    finally:
        a.close()
        b.close()
