"""The PostgreSQL schema: the SQLite migrations' tables at ``SUPPORTED_SCHEMA_VERSION``, a meta
table, append-only triggers, and first-time setup.

One schema definition serves both backends: each step of ``ledger.migrations.MIGRATIONS`` is
translated (``INTEGER`` → ``BIGINT``, ``REAL`` → ``DOUBLE PRECISION``, ``TEXT`` → ``TEXT COLLATE
"C"`` so text orders by bytes as in SQLite; ``PRAGMA`` statements are SQLite's own and
skipped). A PostgreSQL ledger is never older than ``PG_BASE_VERSION``,
so the data moves of steps up to it (back-fills, copies between tables) run on empty tables
and are skipped; every later step runs in full, so its SQL must be portable.

Invariants:
- ``agentctl_meta`` holds the marker (``ledger = agentctl``) and ``schema_version``; a
  database whose current schema has tables but no marker is someone else's and is refused
  before anything is written; a version newer than supported is refused (the same
  ``FutureVersionError`` as SQLite's) and nothing changes;
- setup (creating or migrating) runs in one transaction holding a transaction-scoped advisory
  lock (``SETUP_LOCK_KEY``), so concurrent first opens from many processes or hosts apply
  each step once; the others wait, re-read the version and find it done. A ledger already at
  the wanted version takes no lock (the hot path);
- SQLite's implicit ``rowid`` (insertion order, used by ``ORDER BY rowid``) is an identity
  column ``rowid`` on the tables read in that order;
- audit events, checkpoints and reconciliations are append-only: a trigger refuses UPDATE,
  and DELETE unless it cascades from deleting the whole run (``agentctl gc``).
"""

from __future__ import annotations

import re
from typing import Any

import psycopg

from agentctl.core.dburl import normalized
from agentctl.errors import FutureVersionError, PersistenceError
from agentctl.ledger.migrations import MIGRATIONS, SUPPORTED_SCHEMA_VERSION, MigrationResult
from agentctl.ledger.sql import SqlParam

PG_BASE_VERSION = 12  # the schema version PostgreSQL support started at
SETUP_LOCK_KEY = 0x41474354_0001  # "AGCT", setup: the advisory lock serialising setup
MARKER = "agentctl"
ROWID_TABLES = ("approvals", "effect_reconciliations", "stream_events")
APPEND_ONLY_TABLES = ("audit_events", "checkpoints", "effect_reconciliations")

_META = """CREATE TABLE agentctl_meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL)"""

# pg_trigger_depth() is 1 for a statement's own rows, more when a foreign key's ON DELETE
# CASCADE (deleting the run) removes them: that whole-run deletion is the one allowed.
_APPEND_ONLY_FN = """CREATE FUNCTION agentctl_append_only() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_OP = 'DELETE' AND pg_trigger_depth() > 1 THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'agentctl ledger: % is append-only; % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END
$fn$"""


def _translate(statement: str) -> str:
    typed = re.sub(r"\bINTEGER\b", "BIGINT", statement)
    typed = re.sub(r"\bREAL\b", "DOUBLE PRECISION", typed)
    # Text compares and sorts by its bytes, as in SQLite, whatever the database's locale.
    return re.sub(r"\bTEXT\b", 'TEXT COLLATE "C"', typed)


def _is_data_move(statement: str) -> bool:
    return statement.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))


def step_statements(version: int) -> list[str]:
    """Migration ``version`` as PostgreSQL statements (see the module docstring)."""
    out = []
    for statement in MIGRATIONS[version - 1]:
        if statement.lstrip().upper().startswith("PRAGMA"):
            continue
        if version <= PG_BASE_VERSION and _is_data_move(statement):
            continue
        out.append(_translate(statement))
    return out


def base_extras() -> list[str]:
    """What PostgreSQL adds at ``PG_BASE_VERSION``: rowid columns, append-only triggers."""
    out = [
        f"ALTER TABLE {t} ADD COLUMN rowid BIGINT GENERATED ALWAYS AS IDENTITY"
        for t in ROWID_TABLES
    ]
    out.append(_APPEND_ONLY_FN)
    out += [
        f"CREATE TRIGGER {t}_append_only BEFORE UPDATE OR DELETE ON {t}"
        " FOR EACH ROW EXECUTE FUNCTION agentctl_append_only()"
        for t in APPEND_ONLY_TABLES
    ]
    return out


def _run(
    conn: psycopg.Connection[Any], sql: str, params: tuple[SqlParam, ...] = ()
) -> Any:  # psycopg's cursor: its callers unpack rows of SQL values, not JSON
    return conn.execute(sql, params or None)


# Both facts in one statement, so under one snapshot: at READ COMMITTED each statement sees
# the latest commits, and a first open that asked "is there a meta table?" and then "are there
# any tables?" in two statements could see another process's setup commit in between and take
# a fresh agentctl ledger for someone else's database.
_SCHEMA_STATE = """SELECT
    EXISTS (SELECT 1 FROM pg_tables
            WHERE schemaname = current_schema() AND tablename = 'agentctl_meta'),
    EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = current_schema())"""


def _schema_state(conn: psycopg.Connection[Any]) -> tuple[bool, bool]:
    has_meta, has_tables = _run(conn, _SCHEMA_STATE).fetchone()
    return bool(has_meta), bool(has_tables)


def _meta_rows(conn: psycopg.Connection[Any]) -> dict[str, str]:
    # Called only once the table was seen committed: setup never drops it, so it is still there.
    return {str(r[0]): str(r[1]) for r in _run(conn, "SELECT name, value FROM agentctl_meta")}


def checked_version(conn: psycopg.Connection[Any], shown: str) -> int | None:
    """The ledger's schema version; None for an empty database. Refuses a foreign or newer one."""
    has_meta, has_tables = _schema_state(conn)
    meta = _meta_rows(conn) if has_meta else None
    if meta is None:
        if has_tables:
            raise PersistenceError(
                f"{shown} is not an agentctl ledger (it has tables of its own and no "
                "agentctl_meta); refusing to take it over — it was left unchanged "
                "(choose another --db)"
            )
        return None
    if meta.get("ledger") != MARKER or not meta.get("schema_version", "").isdigit():
        raise PersistenceError(
            f"{shown} is not an agentctl ledger (its agentctl_meta has no agentctl marker); "
            "refusing to take it over — it was left unchanged (choose another --db)"
        )
    version = int(meta["schema_version"])
    if version > SUPPORTED_SCHEMA_VERSION:
        raise FutureVersionError(
            f"database {shown} has schema {version}, newer than supported "
            f"{SUPPORTED_SCHEMA_VERSION}; upgrade agentctl to open it"
        )
    return version


def _apply(conn: psycopg.Connection[Any], start: int | None, goal: int) -> tuple[int, ...]:
    if start is None:
        _run(conn, _META)
        _run(conn, "INSERT INTO agentctl_meta VALUES ('ledger', %s)", (MARKER,))
        _run(conn, "INSERT INTO agentctl_meta VALUES ('schema_version', '0')")
    applied = tuple(range((start or 0) + 1, goal + 1))
    for version in applied:
        for statement in step_statements(version):
            _run(conn, statement)
        if version == PG_BASE_VERSION:
            for statement in base_extras():
                _run(conn, statement)
    _run(conn, "UPDATE agentctl_meta SET value = %s WHERE name = 'schema_version'", (str(goal),))
    return applied


def set_up(conn: psycopg.Connection[Any], shown: str, target: int | None) -> MigrationResult:
    """Create or migrate the ledger in ``conn``'s database (an autocommit connection)."""
    goal = SUPPORTED_SCHEMA_VERSION if target is None else target
    if goal < PG_BASE_VERSION:
        raise PersistenceError(f"a PostgreSQL ledger starts at schema {PG_BASE_VERSION}")
    with conn.transaction():
        found = checked_version(conn, shown)
        if found is not None and found >= goal:
            return MigrationResult(found, found, ())
    with conn.transaction():
        _run(conn, "SELECT pg_advisory_xact_lock(%s)", (SETUP_LOCK_KEY,))
        start = checked_version(conn, shown)  # again, under the lock: another may have won
        if start is not None and start >= goal:
            return MigrationResult(start, start, ())
        applied = _apply(conn, start, goal)
    return MigrationResult(start or 0, goal, applied)


def probe_version(url: str, shown: str) -> int | None:
    """The ledger's schema version read in a read-only transaction (None: no ledger yet);
    raises the refusals of ``checked_version`` and psycopg's errors, writes nothing."""
    with psycopg.connect(normalized(url), autocommit=True, connect_timeout=5) as conn:
        conn.read_only = True
        with conn.transaction():
            return checked_version(conn, shown)
