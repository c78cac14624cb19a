"""A new ledger is built aside and renamed into place: SIGKILL at every step of that, and the
path holds either nothing or a complete ledger; the next open (and a run on it) succeeds."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agentctl.crashpoints import CRASH_ENV, CrashPoint
from agentctl.ledger.connection import open_database
from agentctl.ledger.migrations import SUPPORTED_SCHEMA_VERSION

_OPEN = (
    "import sys; from agentctl.ledger.connection import open_database; open_database(sys.argv[1])"
)


def _tables(db: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        return {str(r[0]) for r in rows}
    finally:
        conn.close()


@pytest.mark.parametrize("point", [p.value for p in CrashPoint if p.startswith("ledger.")])
def test_kill_while_creating_a_ledger(db_path: Path, point: str) -> None:
    db_path.parent.mkdir(parents=True)
    killed = subprocess.run(
        [sys.executable, "-c", _OPEN, str(db_path)],
        env={**os.environ, CRASH_ENV: point},
        capture_output=True,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    before_rename = point == CrashPoint.LEDGER_NEW_BEFORE_RENAME
    # Nothing half-built is ever at the path: absent, or a complete ledger.
    assert db_path.exists() is not before_rename
    if db_path.exists():
        assert {"runs", "task_states"} <= _tables(db_path)
    led = open_database(db_path)
    try:
        assert led.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert led.conn.execute("PRAGMA user_version").fetchone()[0] == SUPPORTED_SCHEMA_VERSION
        assert led.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert led.conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    finally:
        led.close()
    # The killed creator's aside file is gone once someone created the ledger.
    assert [p.name for p in db_path.parent.iterdir() if ".new-" in p.name] == []


def test_a_new_ledger_reports_the_steps_it_applied(db_path: Path) -> None:
    led = open_database(db_path)
    try:
        assert led.migration.applied == tuple(range(1, SUPPORTED_SCHEMA_VERSION + 1))
        assert led.migration.to_version == SUPPORTED_SCHEMA_VERSION
    finally:
        led.close()
    assert [p.name for p in db_path.parent.iterdir() if ".new-" in p.name] == []


def test_an_empty_file_at_the_path_is_set_up_in_place(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    db_path.touch()
    inode = db_path.stat().st_ino
    led = open_database(db_path)
    led.close()
    assert db_path.stat().st_ino == inode
    assert {"runs", "task_states"} <= _tables(db_path)
