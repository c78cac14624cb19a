"""SIGKILL at every step of ingestion and GC: nothing partial is visible, the next open recovers."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ledger_helpers import T0, make_run, ts

from agentctl.crashpoints import CRASH_ENV, CrashPoint
from agentctl.ledger import TaskCompletion
from agentctl.ledger.artifacts.gc import run_gc
from agentctl.ledger.artifacts.refs import commit_artifact_refs_txn, list_blobs
from agentctl.ledger.artifacts.store import ArtifactStore, open_artifact_store
from agentctl.ledger.connection import Database, open_database
from agentctl.ledger.tasks import commit_tasks_txn

LATER = "2024-07-01T12:00:00.000Z"

_STEP = textwrap.dedent(
    """
    import sys
    from agentctl.ledger.connection import open_database
    from agentctl.ledger.artifacts.gc import run_gc
    from agentctl.ledger.artifacts.store import open_artifact_store

    db, action, arg, now = sys.argv[1:5]
    store = open_artifact_store(open_database(db))
    if action == "ingest":
        store.ingest(arg, now)
    else:
        run_gc(store, now)
    """
)


def _run_step(tmp_path: Path, db: Path, point: str, action: str, arg: str, now: str) -> None:
    script = tmp_path / "step.py"
    script.write_text(_STEP)
    env = {**os.environ, CRASH_ENV: point}
    proc = subprocess.run(
        [sys.executable, str(script), str(db), action, arg, now], env=env, capture_output=True
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()


def _reopen_consistent(db: Path) -> tuple[Database, ArtifactStore]:
    """Open after a crash and check that the store and database agree byte for byte."""
    led = open_database(db)
    store = open_artifact_store(led)
    assert led.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert list(store.tmp_dir.iterdir()) == [] and list(store.trash_dir.iterdir()) == []
    for sub in store.blobs_dir.iterdir():
        for blob in sub.iterdir():  # every visible blob is complete
            assert hashlib.sha256(blob.read_bytes()).hexdigest() == blob.name
    with led.read() as conn:
        for b in list_blobs(conn):  # every row names real bytes
            assert store.blob_path(b.digest).stat().st_size == b.size_bytes
    return led, store


@pytest.mark.parametrize("point", [p.value for p in CrashPoint if p.startswith("artifact.")])
def test_kill_during_ingest(tmp_path: Path, db_path: Path, point: str) -> None:
    open_artifact_store(open_database(db_path)).ledger.close()
    src = tmp_path / "big.bin"
    data = os.urandom(3 * 1024 * 1024 + 17)
    src.write_bytes(data)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    _run_step(tmp_path, db_path, point, "ingest", str(src), T0)
    led, store = _reopen_consistent(db_path)
    with led.read() as conn:
        rows = [b.digest for b in list_blobs(conn)]
    assert rows == ([digest] if point == "artifact.after_blob_row" else [])
    assert store.blob_path(digest).exists() == (point != "artifact.after_tmp_write")
    # an untracked blob from the rename window is collected; a leased one is kept
    run_gc(store, "2024-05-01T12:30:00.000Z", older_than_days=0)
    assert store.blob_path(digest).exists() == (point == "artifact.after_blob_row")
    again = store.ingest(src, ts(1))  # and ingestion works afterwards
    assert again.digest == digest and store.verify(ts(2), [digest])["valid"]
    led.close()


def _gc_fixture(tmp_path: Path, db: Path) -> tuple[str, str]:
    """One unreachable old blob (the victim) and one referenced blob (kept)."""
    led = open_database(db)
    store = open_artifact_store(led)
    make_run(led)
    victim_src, kept_src = tmp_path / "victim", tmp_path / "kept"
    victim_src.write_bytes(b"victim bytes")
    kept_src.write_bytes(b"kept bytes")
    victim, kept = store.ingest(victim_src, T0), store.ingest(kept_src, T0)
    with led.transaction() as conn:
        commit_artifact_refs_txn(conn, "run-1", "a", 1, [], [victim.lease_id], T0)
        reused = TaskCompletion(
            "a", "succeeded", 0, artifacts=[kept.ref("kept")], ingest_lease_ids=[kept.lease_id]
        )
        commit_tasks_txn(conn, "run-1", [reused], None, ts(1))
    led.close()
    return victim.digest, kept.digest


@pytest.mark.parametrize("point", [p.value for p in CrashPoint if p.startswith("gc.")])
def test_kill_during_gc(tmp_path: Path, db_path: Path, point: str) -> None:
    victim, kept = _gc_fixture(tmp_path, db_path)
    _run_step(tmp_path, db_path, point, "gc", "-", LATER)
    led, store = _reopen_consistent(db_path)
    committed = point == "gc.after_commit"
    with led.read() as conn:
        rows = {b.digest for b in list_blobs(conn)}
    assert rows == ({kept} if committed else {victim, kept})
    assert store.blob_path(victim).exists() == (not committed)
    assert store.verify(ts(2), [kept])["valid"]
    finished = run_gc(store, LATER)  # a later collection completes the job
    assert not store.blob_path(victim).exists() and store.blob_path(kept).exists()
    assert [b["digest"] for b in finished["report"]["blobs"]] == ([] if committed else [victim])
    led.close()
