"""Migrations: every older schema version, with data in it, migrates to the newest."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest
from ledger_helpers import T0, new_run

from agentctl.core.canonical import sha256_hex
from agentctl.ledger import SUPPORTED_SCHEMA_VERSION
from agentctl.ledger.audit import list_checkpoints
from agentctl.ledger.budget import budget_snapshot
from agentctl.ledger.connection import open_database
from agentctl.ledger.effects import list_effects
from agentctl.ledger.migrations import APPLICATION_ID, MIGRATIONS, migrate
from agentctl.ledger.runs import create_run_txn, get_run
from agentctl.ledger.sessions import list_provider_sessions
from agentctl.ledger.streams import list_stream_events
from agentctl.ledger.tasks import list_tasks
from agentctl.ledger.tool_calls import list_tool_calls


def _fill_v1(conn: sqlite3.Connection) -> None:
    """Data written by a version-1 agentctl (only the v1 columns exist)."""
    conn.execute(
        "INSERT INTO runs (run_id, state, mode, workflow_name, workflow_digest, plan_digest,"
        " workflow_json, plan_json, inputs_json, working_memory_json, trace_id, created_at,"
        " updated_at) VALUES ('run-old', 'succeeded', 'execute', 'demo', 'wd', 'pd', '{}', '{}',"
        " '{}', '{\"k\":1}', 'trace-old', ?, ?)",
        (T0, T0),
    )
    conn.execute(
        "INSERT INTO task_states (run_id, task_id, position, state, attempt, output_json,"
        " updated_at) VALUES ('run-old', 'a', 0, 'succeeded', 1, '{\"ok\":true}', ?)",
        (T0,),
    )
    conn.execute(
        "INSERT INTO effects (effect_id, run_id, task_id, attempt, ordinal, operation,"
        " input_digest, effect_class, risk, idempotency, idempotency_key, status, request_json,"
        " requested_at, confirmed) VALUES ('e1', 'run-old', 'a', 1, 0, 'builtin.write', 'd',"
        " 'workspace_mutate', 'medium', 'idempotent', 'e1', 'succeeded', '{}', ?, 1)",
        (T0,),
    )
    state = '{"runId":"run-old"}'
    conn.execute(
        "INSERT INTO checkpoints (run_id, sequence, state_json, checksum, created_at)"
        " VALUES ('run-old', 1, ?, ?, ?)",
        (state, sha256_hex(state), T0),
    )


def _fill_v2(conn: sqlite3.Connection) -> None:
    conn.execute(
        "INSERT INTO long_term_memory (namespace, key, value_json, created_at, updated_at)"
        " VALUES ('ns', 'k', '1', ?, ?)",
        (T0, T0),
    )
    # A stream event as v2 shaped it (no effect link, provider sequence or truncation yet).
    conn.execute(
        "INSERT INTO stream_events (run_id, task_id, attempt, sequence, event_type,"
        " payload_json, created_at) VALUES ('run-old', 'a', 1, 1, 'text.delta',"
        ' \'{"text":"hi"}\', ?)',
        (T0,),
    )
    # A provider session and a tool call as v2 shaped them (v16 adds their counters and ids).
    conn.execute(
        "INSERT INTO provider_sessions (session_id, run_id, task_id, attempt, provider, model,"
        " created_at, updated_at) VALUES ('s-old', 'run-old', 'a', 1, 'fake', 'm', ?, ?)",
        (T0, T0),
    )
    conn.execute(
        "INSERT INTO tool_calls (run_id, call_id, task_id, tool, status, input_json, created_at)"
        " VALUES ('run-old', 'a:1:call-1', 'a', 'read', 'succeeded', '{}', ?)",
        (T0,),
    )


def _fill_v3(conn: sqlite3.Connection) -> None:
    """A v3 agentctl creates a run together with its budget ledger row."""
    conn.execute(
        "INSERT INTO run_budgets (run_id, limits_json, updated_at) VALUES ('run-old', '{}', ?)",
        (T0,),
    )


def _fill_v12(conn: sqlite3.Connection) -> None:
    """From v12 a run's documents live in their own row beside the ``runs`` row."""
    conn.execute(
        "INSERT INTO run_documents (run_id, workflow_json, plan_json) VALUES ('run-old', '{}', '{}')"
    )


_FILLERS = {
    1: [_fill_v1],
    2: [_fill_v1, _fill_v2],
    3: [_fill_v1, _fill_v2, _fill_v3],
    4: [_fill_v1, _fill_v2, _fill_v3],  # v4 only added a nullable column
    5: [_fill_v1, _fill_v2, _fill_v3],  # v5 only marked the file as ours
    6: [_fill_v1, _fill_v2, _fill_v3],  # v6 only added nullable stream-event columns
    7: [_fill_v1, _fill_v2, _fill_v3],  # v7 only added long-term search columns
    8: [_fill_v1, _fill_v2, _fill_v3],  # v8 only added the protocol tables
    9: [_fill_v1, _fill_v2, _fill_v3],  # v9 only added the remote-handles table
    10: [_fill_v1, _fill_v2, _fill_v3],  # v10 only added the value-blobs table
    11: [_fill_v1, _fill_v2, _fill_v3],  # v11 only added the encryption key-state table
    12: [_fill_v1, _fill_v2, _fill_v3, _fill_v12],
    13: [_fill_v1, _fill_v2, _fill_v3, _fill_v12],  # v13 only dropped a duplicate index
    14: [_fill_v1, _fill_v2, _fill_v3, _fill_v12],  # v14 only added run-queue columns
    15: [_fill_v1, _fill_v2, _fill_v3, _fill_v12],  # v15 only added the plan-parts table
    16: [_fill_v1, _fill_v2, _fill_v3, _fill_v12],  # v16 only added session and tool-call columns
}


def test_every_version_has_a_filler() -> None:
    assert len(MIGRATIONS) >= 4
    assert set(_FILLERS) == set(range(1, SUPPORTED_SCHEMA_VERSION))


@pytest.mark.parametrize("version", range(1, SUPPORTED_SCHEMA_VERSION))
def test_older_schema_with_data_migrates(tmp_path: Path, version: int) -> None:
    db = tmp_path / "old.db"
    old = open_database(db, target_version=version)
    assert old.conn.execute("PRAGMA user_version").fetchone()[0] == version
    marked = old.conn.execute("PRAGMA application_id").fetchone()[0]
    assert marked == (APPLICATION_ID if version >= 5 else 0)  # v5 marks the file
    with old.transaction() as conn:
        for fill in _FILLERS[version]:
            fill(conn)
    old.close()

    led = open_database(db)
    try:
        assert led.migration.from_version == version
        assert led.migration.to_version == SUPPORTED_SCHEMA_VERSION
        assert led.migration.applied == tuple(range(version + 1, SUPPORTED_SCHEMA_VERSION + 1))
        with led.read() as conn:
            # An older ledger of ours is recognised by its runs table and marked as ours.
            assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
            run = get_run(conn, "run-old")
            assert run.working_memory == {"k": 1}
            assert run.source_run_id is None
            assert run.compiled_plan_json is None  # created before v4: resume recompiles
            (task,) = list_tasks(conn, "run-old")
            assert (task.state, task.disposition, task.output) == (
                "succeeded",
                "executed",
                {"ok": True},
            )
            assert [e.effect_id for e in list_effects(conn, "run-old")] == ["e1"]
            assert budget_snapshot(conn, "run-old").usage == {}  # back-filled zero ledger
            assert len(list_checkpoints(conn, "run-old")) == 1
            events = list_stream_events(conn, "run-old")  # kept, the newer columns empty
            assert [(e.sequence, e.payload, e.effect_id, e.truncated) for e in events] == (
                [(1, {"text": "hi"}, None, False)] if version >= 2 else []
            )
            sessions = [
                (p.session_id, p.status, p.calls, p.usage, p.finish, p.provider_kind)
                for p in list_provider_sessions(conn, "run-old")
            ]
            assert sessions == ([("s-old", "running", 0, {}, None, None)] if version >= 2 else [])
            calls = [c.to_json() for c in list_tool_calls(conn, "run-old")]
            assert [(c["callId"], c["attempt"]) for c in calls] == (
                [("a:1:call-1", None)] if version >= 2 else []
            )
        assert led.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        led.close()


def test_reopening_the_newest_applies_nothing(db_path: Path) -> None:
    open_database(db_path).close()
    led = open_database(db_path)
    assert led.migration.to_json() == {
        "from": SUPPORTED_SCHEMA_VERSION,
        "to": SUPPORTED_SCHEMA_VERSION,
        "applied": [],
    }
    led.close()


def test_a_failing_migration_leaves_the_previous_version(tmp_path: Path) -> None:
    db = tmp_path / "half.db"
    open_database(db, target_version=1).close()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE TABLE provider_sessions (x)")  # makes migration 2 fail midway
    with pytest.raises(sqlite3.OperationalError):
        migrate(conn)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    columns = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
    assert "source_run_id" not in columns  # the ALTERs before the failure rolled back
    conn.close()


def test_v12_moves_a_runs_documents_out_of_its_row(tmp_path: Path) -> None:
    """The stored workflow and plans leave the ``runs`` row (rewritten by every batch commit)
    for ``run_documents``, and read back the same."""
    db = tmp_path / "old.db"
    old = open_database(db, target_version=11)
    with old.transaction() as conn:
        _fill_v1(conn)
        conn.execute(
            "UPDATE runs SET workflow_json = ?, plan_json = ?, compiled_plan_json = ?",
            ('{"kind":"Workflow"}', '{"tasks":[]}', '{"format":1}'),
        )
    old.close()
    led = open_database(db)
    try:
        with led.read() as conn:
            run = get_run(conn, "run-old")
            inline = conn.execute(
                "SELECT workflow_json, plan_json, compiled_plan_json FROM runs"
            ).fetchone()
        assert (run.workflow, run.plan) == ({"kind": "Workflow"}, {"tasks": []})
        assert run.compiled_plan_json == '{"format":1}'
        assert tuple(inline) == ("{}", "{}", None)
    finally:
        led.close()


def test_v15_keeps_an_older_runs_inline_plan_beside_new_runs_plans_in_parts(
    tmp_path: Path,
) -> None:
    """v15 moves nothing: a run stored before it keeps its plan in ``compiled_plan_json`` and
    reads it from there; a run created after it stores its plan in ``run_plan_parts``."""
    db = tmp_path / "old.db"
    old = open_database(db, target_version=14)
    with old.transaction() as conn:
        _fill_v1(conn)
        _fill_v12(conn)
        conn.execute("UPDATE run_documents SET compiled_plan_json = ?", ('{"format":1}',))
    old.close()
    led = open_database(db)
    try:
        with led.transaction() as conn:
            run = dataclasses.replace(new_run("run-new"), compiled_plan_json='{"format":2}')
            create_run_txn(conn, run, ["a"], T0)
        with led.read() as conn:
            assert get_run(conn, "run-old").compiled_plan_json == '{"format":1}'
            assert get_run(conn, "run-new").compiled_plan_json == '{"format":2}'
            rows = conn.execute(
                "SELECT run_id, plan_parts, compiled_plan_json FROM run_documents ORDER BY run_id"
            ).fetchall()
        assert [tuple(r) for r in rows] == [
            ("run-new", 1, None),
            ("run-old", None, '{"format":1}'),
        ]
    finally:
        led.close()


def test_effect_lookups_by_task_keep_an_index_after_the_duplicate_is_dropped(
    tmp_path: Path,
) -> None:
    """v13 drops ``effects_by_task`` (a copy of the effects' unique index): a migrated ledger
    has no such index, and looking a task's effects up still searches an index."""
    old = open_database(tmp_path / "old.db", target_version=12)
    names = "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'effects'"
    assert "effects_by_task" in [r[0] for r in old.conn.execute(names)]
    old.close()
    led = open_database(tmp_path / "old.db")
    try:
        assert "effects_by_task" not in [r[0] for r in led.conn.execute(names)]
        plan = led.conn.execute(
            "EXPLAIN QUERY PLAN SELECT * FROM effects WHERE run_id = ? AND task_id = ?"
            " AND attempt = ? ORDER BY ordinal DESC LIMIT 1",
            ("r", "t", 1),
        ).fetchall()
        assert any("USING INDEX" in str(r[3]) for r in plan), plan
    finally:
        led.close()


# The derived-run lookups (``lifecycle._refuse_superseded`` on every resume, ``report``'s
# descendants): each must search an index of ``runs``, never scan it.
DERIVED_RUN_LOOKUPS = (
    "SELECT run_id, mode FROM runs WHERE source_run_id = ? AND mode IN ('repair', 'retry')"
    " ORDER BY created_at LIMIT 1",
    "SELECT run_id FROM runs WHERE parent_run_id IN (?) OR source_run_id IN (?)"
    " ORDER BY created_at, run_id",
)


def test_v17_finds_derived_runs_by_index(tmp_path: Path) -> None:
    """v17 indexes ``runs.source_run_id`` and ``runs.parent_run_id``: a ledger migrated from
    v16, with a derived run in it, finds that run through them."""
    old = open_database(tmp_path / "old.db", target_version=16)
    with old.transaction() as conn:
        _fill_v1(conn)
        conn.execute(
            "INSERT INTO runs (run_id, state, mode, workflow_name, workflow_digest, plan_digest,"
            " workflow_json, plan_json, inputs_json, working_memory_json, trace_id, created_at,"
            " updated_at, source_run_id) SELECT 'retry-new', 'failed', 'retry', workflow_name,"
            " workflow_digest, plan_digest, '{}', '{}', '{}', '{}', 'trace-new', created_at,"
            " updated_at, run_id FROM runs WHERE run_id = 'run-old'"
        )
    old.close()
    led = open_database(tmp_path / "old.db")
    try:
        assert led.migration.applied == tuple(range(17, SUPPORTED_SCHEMA_VERSION + 1))
        superseded, descendants = DERIVED_RUN_LOOKUPS
        found = led.conn.execute(superseded, ("run-old",)).fetchall()
        assert [tuple(r) for r in found] == [("retry-new", "retry")]
        for query, params in ((superseded, ("run-old",)), (descendants, ("run-old", "run-old"))):
            plan = [str(r[3]) for r in led.conn.execute("EXPLAIN QUERY PLAN " + query, params)]
            assert not any(step.startswith("SCAN runs") for step in plan), plan
            assert any("USING INDEX runs_by_source" in step for step in plan), plan
        assert any("USING INDEX runs_by_parent" in step for step in plan), plan
    finally:
        led.close()
