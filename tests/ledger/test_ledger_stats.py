"""The JSON data behind the CLI's read commands."""

from __future__ import annotations

from pathlib import Path

import pytest
from ledger_helpers import T0, make_run, ts

from agentctl.errors import NotFoundError, ValidationError
from agentctl.ledger import SUPPORTED_SCHEMA_VERSION, NewEffect, TaskCompletion
from agentctl.ledger.artifacts.store import open_artifact_store
from agentctl.ledger.connection import Database
from agentctl.ledger.effects import find_effect_id, insert_effect_txn
from agentctl.ledger.runs import list_runs
from agentctl.ledger.stats import (
    RunList,
    artifact_inspection,
    artifact_list,
    database_stats,
    effect_inspection,
    effect_list,
    run_inspection,
)
from agentctl.ledger.tasks import commit_tasks_txn


@pytest.mark.sqlite_only
def test_database_stats_and_migration(ledger: Database, db_path: Path) -> None:
    make_run(ledger)
    with ledger.read() as conn:
        stats = database_stats(conn, db_path).to_json()
    assert stats["path"] == str(db_path) and stats["journalMode"] == "wal"
    assert stats["schemaVersion"] == stats["supportedSchemaVersion"] == SUPPORTED_SCHEMA_VERSION
    assert stats["counts"]["runs"] == 1 and stats["counts"]["task_states"] == 3
    assert stats["sizeBytes"] > 0
    assert ledger.migration.to_json()["applied"] == list(range(1, SUPPORTED_SCHEMA_VERSION + 1))


def test_run_inspection_and_effect_lists(ledger: Database) -> None:
    make_run(ledger)
    effect = NewEffect("run-1", "a", 1, 0, "builtin.read", {}, "observe", "low", "idempotent")
    with ledger.transaction() as conn:
        eid = insert_effect_txn(conn, effect, ts(1))
    with ledger.read() as conn:
        inspection = run_inspection(conn, "run-1").to_json()
        assert inspection["run"]["runId"] == "run-1"
        assert [t["taskId"] for t in inspection["tasks"]] == ["a", "b", "c"]
        assert [e["effectId"] for e in inspection["effects"]] == [eid]
        assert inspection["budget"]["usage"] == {}
        listing = effect_list(conn, "run-1", "a").to_json()
        assert listing["runId"] == "run-1" and len(listing["effects"]) == 1
        assert effect_inspection(conn, eid).to_json()["effectiveReconciliation"] is None
        assert RunList(tuple(list_runs(conn))).to_json()["runs"][0]["runId"] == "run-1"
        with pytest.raises(NotFoundError):
            effect_list(conn, "run-missing")
        assert effect_list(conn, "run-1", "b").effects == ()  # a task with no effects
        for typo in ("z", ""):  # not a task of the run: not found, never "no effects"
            with pytest.raises(NotFoundError, match=f"task {typo!r} not found in run run-1"):
                effect_list(conn, "run-1", typo)


def test_artifact_list_and_inspection(ledger: Database, tmp_path: Path) -> None:
    make_run(ledger)
    store = open_artifact_store(ledger)
    src = tmp_path / "r.md"
    src.write_text("# hi")
    got = store.ingest(src, T0)
    with ledger.transaction() as conn:
        done = TaskCompletion("a", "succeeded", 0, artifacts=[got.ref("r.md")])
        commit_tasks_txn(conn, "run-1", [done], None, ts(1))
    with ledger.read() as conn:
        listing = artifact_list(conn, "run-1", "a").to_json()
        assert [r["digest"] for r in listing["references"]] == [got.digest]
        assert [b["digest"] for b in listing["blobs"]] == [got.digest]
        assert artifact_list(conn, "run-1", "b").blobs == ()
        inspected = artifact_inspection(conn, got.digest).to_json()
        assert inspected["blob"]["sizeBytes"] == 4
        assert inspected["references"][0]["mediaType"] == "text/markdown"
        with pytest.raises(ValidationError):
            artifact_list(conn, None, "a")
        with pytest.raises(NotFoundError, match="task 'z' not found in run run-1"):
            artifact_list(conn, "run-1", "z")
        with pytest.raises(NotFoundError):
            artifact_inspection(conn, "sha256:" + "1" * 64)


def test_an_effect_is_found_by_a_unique_prefix_of_its_id(ledger: Database) -> None:
    make_run(ledger)
    made = [
        NewEffect("run-1", "a", 1, n, "builtin.read", {}, "observe", "low", "idempotent")
        for n in range(3)
    ]
    with ledger.transaction() as conn:
        ids = [insert_effect_txn(conn, effect, ts(1)) for effect in made]
        # Two ids made to share their first eight digits: a prefix of eight is ambiguous.
        for eid in ids[1:]:
            sql = "UPDATE effects SET effect_id = ? WHERE effect_id = ?"
            conn.execute(sql, ("abcdef01" + eid[8:], eid))
    first, shared = ids[0], ["abcdef01" + eid[8:] for eid in ids[1:]]
    with ledger.read() as conn:
        assert find_effect_id(conn, first[:6]) == first == find_effect_id(conn, first.upper())
        assert find_effect_id(conn, shared[0][:12]) == shared[0]  # enough to tell them apart
        with pytest.raises(ValidationError, match="ambiguous"):
            find_effect_id(conn, "abcdef01")
        with pytest.raises(NotFoundError, match="at least 6 hex digits"):
            find_effect_id(conn, first[:5])  # too short to be a prefix: an unknown id
        with pytest.raises(NotFoundError, match="not found"):
            find_effect_id(conn, "0000000000")
        with pytest.raises(NotFoundError, match="not found"):
            find_effect_id(conn, "run-1")
