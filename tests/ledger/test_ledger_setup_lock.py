"""The setup lock ``<db>.lock``: processes creating, converting or migrating one ledger at once.

Each process here is a real interpreter opening the ledger with ``open_database``; they are
released together (a start file) so their setups overlap. Every one must succeed, and every
migration step must be applied by exactly one of them.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentctl.errors import LockTimeoutError
from agentctl.ledger.connection import open_database
from agentctl.ledger.migrations import SUPPORTED_SCHEMA_VERSION
from agentctl.ledger.setup_lock import setup_lock

PROCESSES = 4
ROUNDS = 3
# Opens the ledger argv[1] once the file argv[2] exists; prints the migration steps it applied.
_OPEN = """
import json, os, sys, time
from agentctl.ledger.connection import open_database
while not os.path.exists(sys.argv[2]):
    time.sleep(0.001)
db = open_database(sys.argv[1])
print(json.dumps(list(db.migration.applied)))
db.close()
"""
# Holds an exclusive flock on argv[1] until its stdin closes.
_HOLD = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""

pytestmark = pytest.mark.sqlite_only


def _version_and_mode(db: Path) -> tuple[int, str]:
    conn = sqlite3.connect(db)
    try:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
        return int(version), str(mode)
    finally:
        conn.close()


def _open_together(db: Path) -> list[int]:
    """Every step the processes applied, in one list (a step twice would appear twice)."""
    go = db.parent / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _OPEN, str(db), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(PROCESSES)
    ]
    go.touch()
    applied: list[int] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        applied.extend(json.loads(out))
    return sorted(applied)


@pytest.mark.parametrize("start", ["missing", "empty file", "older schema"])
def test_processes_setting_up_one_ledger_at_once_all_succeed(tmp_path: Path, start: str) -> None:
    older = SUPPORTED_SCHEMA_VERSION - 3
    for round_no in range(ROUNDS):
        db = tmp_path / f"round-{round_no}" / "runtime.db"
        db.parent.mkdir()
        first = 1
        if start == "empty file":
            db.touch()
        elif start == "older schema":
            open_database(db, target_version=older).close()
            first = older + 1
        applied = _open_together(db)
        assert applied == list(range(first, SUPPORTED_SCHEMA_VERSION + 1)) or (
            start == "missing" and applied == []  # a new ledger comes from the schema script
        )
        assert _version_and_mode(db) == (SUPPORTED_SCHEMA_VERSION, "wal")


def _holding(lock_file: Path) -> subprocess.Popen[bytes]:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(lock_file)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline() == b"held\n"
    return holder


def _has_open(pid: int, path: Path) -> bool:
    fds = Path(f"/proc/{pid}/fd")
    return any(os.path.realpath(fd) == str(path) for fd in fds.iterdir())


def test_a_creator_waits_while_another_process_holds_the_setup_lock(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    lock_file = (db_path.parent / "runtime.db.lock").resolve()
    holder = _holding(lock_file)
    opener = subprocess.Popen(
        [sys.executable, "-c", _OPEN, str(db_path), str(lock_file)], stdout=subprocess.PIPE
    )
    while opener.poll() is None and not _has_open(opener.pid, lock_file):
        time.sleep(0.01)
    time.sleep(0.5)  # room for an opener that did not wait to get its ledger made
    assert opener.poll() is None
    assert not db_path.exists()
    holder.communicate(b"")  # the holder ends: its lock is released
    opener.communicate(timeout=120)
    assert opener.returncode == 0
    assert _version_and_mode(db_path) == (SUPPORTED_SCHEMA_VERSION, "wal")
    assert lock_file.stat().st_mode & 0o777 == 0o600


def test_a_setup_lock_held_beyond_the_timeout_is_a_lock_timeout(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    holder = _holding(Path(f"{db_path}.lock"))
    try:
        with pytest.raises(LockTimeoutError), setup_lock(db_path, timeout_s=0.05):
            pass
    finally:
        holder.communicate(b"")
    with setup_lock(db_path, timeout_s=0.05):  # released with its holder's end
        fd = os.open(f"{db_path}.lock", os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another description: refused
        finally:
            os.close(fd)
