"""What is PostgreSQL's own in the ledger: setup, refusals, append-only triggers, redaction.

Runs against the server ``pg_fixture`` finds (skipped with the reason when none answers).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from ledger_helpers import T0, make_run

from agentctl.errors import FutureVersionError, NotFoundError, PersistenceError
from agentctl.ledger import SUPPORTED_SCHEMA_VERSION
from agentctl.ledger.pg.ledger import open_pg_ledger


def _sql(url: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(sql)  # type: ignore[arg-type]  # test-only literal SQL
        return cur.fetchall() if cur.description else []


def test_a_new_database_gets_the_current_schema_and_marker(pg_url: str, tmp_path: Path) -> None:
    led = open_pg_ledger(pg_url, artifacts=tmp_path / "art")
    assert led.migration().to_version == SUPPORTED_SCHEMA_VERSION
    led.close()
    meta = dict(_sql(pg_url, "SELECT name, value FROM agentctl_meta"))
    assert meta == {"ledger": "agentctl", "schema_version": str(SUPPORTED_SCHEMA_VERSION)}
    again = open_pg_ledger(pg_url, artifacts=tmp_path / "art")
    assert again.migration().applied == ()
    again.close()


def test_concurrent_first_opens_set_up_once(pg_url: str, tmp_path: Path) -> None:
    script = (
        "import sys\nfrom agentctl.ledger.pg.ledger import open_pg_ledger\n"
        "print(len(open_pg_ledger(sys.argv[1], artifacts=sys.argv[2]).migration().applied))\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, pg_url, str(tmp_path / "art")],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    applied = sorted(int(p.communicate(timeout=120)[0]) for p in procs)
    assert all(p.returncode == 0 for p in procs)
    assert applied == [0, 0, 0, SUPPORTED_SCHEMA_VERSION]


class _CommitsOtherAfterFirstStatement:
    """A connection whose first statement is followed by another session's commit."""

    def __init__(self, conn: psycopg.Connection[object], other: psycopg.Connection[object]):
        self.conn, self.other, self.statements = conn, other, 0

    def execute(self, sql: str, params: object = None) -> object:
        cur = self.conn.execute(sql, params)  # type: ignore[arg-type]  # test-only literal SQL
        self.statements += 1
        if self.statements == 1:
            self.other.commit()
        return cur


def test_a_setup_committed_between_statements_is_not_taken_for_a_foreign_one(
    pg_url: str,
) -> None:
    # Another first open holds its whole setup uncommitted; it commits right after this
    # check's first statement. The check must answer from one snapshot (an empty database),
    # not take the now-visible tables without a meta row it read earlier for a foreign ledger.
    from agentctl.ledger.pg import schema

    with psycopg.connect(pg_url) as other, psycopg.connect(pg_url, autocommit=True) as conn:
        schema._apply(other, None, SUPPORTED_SCHEMA_VERSION)  # type: ignore[arg-type]
        racing = _CommitsOtherAfterFirstStatement(conn, other)  # type: ignore[arg-type]
        assert schema.checked_version(racing, "db") is None  # type: ignore[arg-type]
        assert schema.checked_version(conn, "db") == SUPPORTED_SCHEMA_VERSION  # type: ignore[arg-type]


def test_a_newer_schema_is_refused_and_left_unchanged(pg_url: str, tmp_path: Path) -> None:
    open_pg_ledger(pg_url, artifacts=tmp_path / "art").close()
    newer = str(SUPPORTED_SCHEMA_VERSION + 1)
    _sql(pg_url, f"UPDATE agentctl_meta SET value = '{newer}' WHERE name = 'schema_version'")
    with pytest.raises(FutureVersionError, match="newer than supported"):
        open_pg_ledger(pg_url, artifacts=tmp_path / "art")
    assert _sql(pg_url, "SELECT value FROM agentctl_meta WHERE name = 'schema_version'") == [
        (newer,)
    ]


def test_a_foreign_database_is_not_taken_over(pg_url: str, tmp_path: Path) -> None:
    _sql(pg_url, "CREATE TABLE customers (id int)")
    with pytest.raises(PersistenceError, match="not an agentctl ledger"):
        open_pg_ledger(pg_url, artifacts=tmp_path / "art")
    tables = _sql(pg_url, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
    assert tables == [("customers",)]


def test_audit_and_checkpoints_are_append_only(pg_url: str, tmp_path: Path) -> None:
    led = open_pg_ledger(pg_url, artifacts=tmp_path / "art")
    ledger = led._pg
    make_run(ledger)
    for sql in (
        "UPDATE audit_events SET event_type = 'x'",
        "DELETE FROM audit_events",
        "UPDATE checkpoints SET state_json = '{}'",
    ):
        with pytest.raises(psycopg.errors.IntegrityConstraintViolation, match="append-only"):
            _sql(ledger.url, sql)
    # Deleting the whole run (agentctl gc) still takes its history with it.
    _sql(ledger.url, "DELETE FROM runs WHERE run_id = 'run-1'")
    assert _sql(ledger.url, "SELECT COUNT(*) FROM audit_events") == [(0,)]
    led.close()


def test_connection_errors_name_the_url_without_its_password(pg_url: str) -> None:
    refused = "postgresql://someone:s3cret-pw@127.0.0.1:1/ledger"
    with pytest.raises(PersistenceError) as got:
        open_pg_ledger(refused)
    assert "s3cret-pw" not in str(got.value) and "someone:***@" in str(got.value)
    base = pg_url.split("?")[0].rsplit("/", 1)[0]
    with pytest.raises(NotFoundError, match="does not exist"):
        open_pg_ledger(f"{base}/pgledger_no_such_db_{T0[:4]}")


def test_database_stats_count_a_table_whatever_its_name(pg_url: str, tmp_path: Path) -> None:
    led = open_pg_ledger(pg_url, artifacts=tmp_path / "art")
    odd = 'odd"name?%'  # a quote, a placeholder mark and a percent sign: all quoted as is
    _sql(pg_url, 'CREATE TABLE "odd""name?%" (id int)')
    _sql(pg_url, 'INSERT INTO "odd""name?%" VALUES (1), (2)')
    counts = led.database_stats().counts
    led.close()
    assert counts[odd] == 2 and counts["runs"] == 0


_APPENDER = """
import sys
from agentctl.ledger.audit import append_audit_txn
from agentctl.ledger.pg.ledger import open_pg_ledger

url, art, worker = sys.argv[1], sys.argv[2], sys.argv[3]
led = open_pg_ledger(url, artifacts=art)
for i in range(25):
    payload = {"worker": worker, "i": i}
    led._pg.run_write(
        lambda conn: append_audit_txn(conn, "run-1", "test.event", payload, "2024-05-01T12:00:00.000Z"))
led.close()
"""


def test_concurrent_appends_keep_the_audit_sequence_gapless(pg_url: str, tmp_path: Path) -> None:
    led = open_pg_ledger(pg_url, artifacts=tmp_path / "art")
    make_run(led._pg)
    before = _sql(pg_url, "SELECT COUNT(*) FROM audit_events")[0][0]
    procs = [
        subprocess.Popen([sys.executable, "-c", _APPENDER, pg_url, str(tmp_path / "art"), str(w)])
        for w in range(4)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    sequences = [r[0] for r in _sql(pg_url, "SELECT sequence FROM audit_events ORDER BY 1")]
    assert sequences == list(range(1, before + 100 + 1))
    led.close()


def test_gc_keeps_a_fresh_blob_file_another_writer_has_not_committed(
    pg_url: str, tmp_path: Path
) -> None:
    from agentctl.ledger.artifacts.gc import run_gc
    from agentctl.ledger.artifacts.store import open_artifact_store

    led = open_pg_ledger(pg_url, artifacts=tmp_path / "art")
    store = open_artifact_store(led._pg)
    pending = store.blobs_dir / "cd" / ("cd" + "1" * 62)  # written, its row not yet committed
    pending.parent.mkdir()
    pending.write_bytes(b"in flight")
    report = run_gc(store, T0, older_than_days=0)
    assert report["report"]["untrackedFiles"] == [] and pending.exists()  # type: ignore[index]
    led.close()


def test_a_v15_ledger_with_sessions_and_tool_calls_migrates(pg_url: str, tmp_path: Path) -> None:
    # The rows a v15 agentctl wrote for an agent attempt (v16 added counters and ids beside
    # them) survive the PostgreSQL translation of every later step, as on SQLite.
    from test_ledger_migrations import _fill_v1, _fill_v2, _fill_v3, _fill_v12

    from agentctl.ledger.pg import schema

    with psycopg.connect(pg_url, autocommit=True) as conn:
        schema.set_up(conn, "db", 15)
        with conn.transaction():
            pg = _PgAsSqlite(conn)
            for fill in (_fill_v1, _fill_v2, _fill_v3, _fill_v12):
                fill(pg)  # type: ignore[arg-type]  # the fillers' SQL, with %s placeholders
    led = open_pg_ledger(pg_url, artifacts=tmp_path / "art")
    try:
        assert led.migration().applied == tuple(range(16, SUPPORTED_SCHEMA_VERSION + 1))
        seen = led.inspect_run("run-old").to_json()
        sessions = [(s["sessionId"], s["calls"], s["usage"]) for s in seen["providerSessions"]]
        assert sessions == [("s-old", 0, {})]
        assert [(c["callId"], c["attempt"]) for c in seen["toolCalls"]] == [("a:1:call-1", None)]
        assert [t["state"] for t in seen["tasks"]] == ["succeeded"]
    finally:
        led.close()


def test_a_v16_ledger_gains_the_derived_run_indexes(pg_url: str, tmp_path: Path) -> None:
    # v17's indexes, translated like every later step: the derived-run lookups the SQLite
    # migration test checks search them here too (the planner told not to scan, as it would
    # on a table this small, so the plan shows whether an index can answer).
    from test_ledger_migrations import DERIVED_RUN_LOOKUPS

    from agentctl.ledger.pg import schema

    with psycopg.connect(pg_url, autocommit=True) as conn:
        schema.set_up(conn, "db", 16)
    indexes = "SELECT indexname FROM pg_indexes WHERE tablename = 'runs' ORDER BY indexname"
    assert not {"runs_by_source", "runs_by_parent"} & {r[0] for r in _sql(pg_url, indexes)}
    led = open_pg_ledger(pg_url, artifacts=tmp_path / "art")
    try:
        assert led.migration().applied == tuple(range(17, SUPPORTED_SCHEMA_VERSION + 1))
    finally:
        led.close()
    assert {"runs_by_source", "runs_by_parent"} <= {r[0] for r in _sql(pg_url, indexes)}
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")
        for query in DERIVED_RUN_LOOKUPS:
            sql = "EXPLAIN " + query.replace("?", "'run-old'")
            plan = " ".join(str(r[0]) for r in conn.execute(sql))
            assert "Seq Scan" not in plan and "runs_by_source" in plan, plan


class _PgAsSqlite:
    """The migration tests' fillers speak sqlite3's ``?``; PostgreSQL's driver takes ``%s``."""

    def __init__(self, conn: psycopg.Connection[object]) -> None:
        self.conn = conn

    def execute(self, sql: str, params: tuple[object, ...] = ()) -> object:
        return self.conn.execute(sql.replace("?", "%s"), params or None)  # type: ignore[arg-type]
