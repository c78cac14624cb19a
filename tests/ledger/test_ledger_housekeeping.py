"""``collect_garbage`` on a real ledger file: whole terminal runs and lineages only, value
blobs unpinned only when no row can name them (ADR 0009)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ledger_helpers import make_run, ts
from test_ledger_values import BIG, _digest, _record_write

from agentctl.ledger.artifacts.store import blob_file, open_artifact_store
from agentctl.ledger.connection import Database
from agentctl.ledger.housekeeping import collect_garbage
from agentctl.ledger.runs import set_run_state_txn

LATER = "2024-07-01T12:00:00.000Z"  # two months after the runs of ledger_helpers


def _run_ids(ledger: Database) -> set[str]:
    with ledger.read() as conn:
        return {str(r[0]) for r in conn.execute("SELECT run_id FROM runs")}


def test_lineage_and_non_terminal_runs_are_kept(ledger: Database) -> None:
    make_run(ledger, "run-src")
    make_run(ledger, "run-child", mode="retry", source_run_id="run-src")
    make_run(ledger, "run-alone")
    with ledger.transaction() as conn:
        set_run_state_txn(conn, "run-src", "failed", ts(1))
        set_run_state_txn(conn, "run-alone", "succeeded", ts(1))
    # run-child is still running: it and its source stay; run-alone goes.
    got = collect_garbage(open_artifact_store(ledger), LATER, older_than_days=30, dry_run=False)
    assert got.removed.runs == ("run-alone",)
    assert _run_ids(ledger) == {"run-src", "run-child"}
    with ledger.transaction() as conn:
        set_run_state_txn(conn, "run-child", "cancelled", ts(2))
    again = collect_garbage(open_artifact_store(ledger), LATER, older_than_days=30, dry_run=False)
    assert set(again.removed.runs) == {"run-src", "run-child"}  # the whole lineage at once
    assert _run_ids(ledger) == set()


def test_an_old_child_of_a_recent_run_is_kept(ledger: Database) -> None:
    # A compensation's reconciliation is stored with the source run and names the
    # compensating run's effect: deleting only the old child would leave it dangling.
    make_run(ledger, "run-src")
    make_run(ledger, "run-comp", mode="compensation", source_run_id="run-src")
    with ledger.transaction() as conn:
        set_run_state_txn(conn, "run-comp", "succeeded", ts(1))
        set_run_state_txn(conn, "run-src", "failed", "2024-06-30T12:00:00.000Z")
    got = collect_garbage(open_artifact_store(ledger), LATER, older_than_days=30, dry_run=False)
    assert got.removed.runs == ()
    assert _run_ids(ledger) == {"run-src", "run-comp"}


@pytest.mark.sqlite_only
def test_an_encrypted_column_keeps_every_value_blob(ledger: Database, db_path: Path) -> None:
    _record_write(ledger, {"content": BIG}, {"after": BIG})
    with ledger.transaction() as conn:
        conn.execute("DELETE FROM runs")  # every row naming the blob is gone...
        conn.execute(
            "INSERT INTO long_term_memory (namespace, key, value_json, created_at, updated_at)"
            " VALUES ('ns', 'k', 'agentctl.encrypted.v1:key-1:opaque', ?, ?)",
            (ts(1), ts(1)),
        )  # ...but an encrypted value could name it, unseen
    store = open_artifact_store(ledger)
    kept = collect_garbage(store, LATER, older_than_days=30, dry_run=False)
    assert kept.removed.value_blobs == 0 and kept.removed.value_blobs_kept_encrypted
    assert blob_file(db_path.parent / "artifacts", _digest(BIG)).exists()
    with ledger.transaction() as conn:
        conn.execute("DELETE FROM long_term_memory")
    freed = collect_garbage(store, LATER, older_than_days=30, dry_run=False)
    assert freed.removed.value_blobs == 1
    assert not blob_file(db_path.parent / "artifacts", _digest(BIG)).exists()
