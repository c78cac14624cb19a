"""A fresh SQLite ledger and a fresh PostgreSQL ledger have the same tables and columns.

Both are made the way a user makes them (``agentctl db migrate``) and read back from each
database's own catalogue: table names, column names, nullability and primary keys must agree,
so a migration added for one backend and forgotten for the other fails here. Types are not
compared: the two spell them differently (``TEXT`` holding JSON, ``INTEGER`` vs ``BIGINT``).
A PostgreSQL column ``rowid`` stands for the implicit rowid of a SQLite table (the statements
that order by insertion read it), so it counts as present on SQLite's side too.
"""

from __future__ import annotations

import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.clibackend import agentctl_argv, cli_env

# Bookkeeping a backend keeps for itself, outside the ledger's schema.
SQLITE_OWN = ("sqlite_",)
POSTGRES_OWN = ("agentctl_meta",)  # the marker and schema version (SQLite: its header)


@dataclass(frozen=True, order=True)
class Column:
    table: str
    name: str
    nullable: bool
    primary_key_position: int  # 0: not part of the primary key


def _migrate(db: str, cwd: Path) -> None:
    argv = agentctl_argv("--output", "json", "db", "migrate", "--db", db)
    done = subprocess.run(argv, cwd=cwd, env=cli_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _sqlite_columns(path: Path) -> set[Column]:
    conn = sqlite3.connect(path)
    try:
        tables = [
            name
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not name.startswith(SQLITE_OWN)
        ]
        return {
            # A primary key column never holds NULL in the ledger, whatever SQLite permits.
            Column(table, name, not notnull and not pk, pk)
            for table in tables
            for (_cid, name, _type, notnull, _default, pk) in conn.execute(
                f'PRAGMA table_info("{table}")'
            )
        }
    finally:
        conn.close()


def _has_rowid(path: Path, table: str) -> bool:
    """Whether ``table`` is a SQLite rowid table (not ``WITHOUT ROWID``)."""
    conn = sqlite3.connect(path)
    try:
        conn.execute(f'SELECT rowid FROM "{table}" LIMIT 0')
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()
    return True


PG_COLUMNS = """
SELECT c.table_name, c.column_name, c.is_nullable = 'YES', COALESCE(k.ordinal_position, 0)
FROM information_schema.columns c
JOIN information_schema.tables t
  ON t.table_schema = c.table_schema AND t.table_name = c.table_name
 AND t.table_type = 'BASE TABLE'
LEFT JOIN information_schema.table_constraints p
  ON p.table_schema = c.table_schema AND p.table_name = c.table_name
 AND p.constraint_type = 'PRIMARY KEY'
LEFT JOIN information_schema.key_column_usage k
  ON k.constraint_schema = p.constraint_schema AND k.constraint_name = p.constraint_name
 AND k.column_name = c.column_name
WHERE c.table_schema = current_schema()
"""


def _postgres_columns(url: str) -> set[Column]:
    import psycopg  # lazily: only this backend needs it

    with psycopg.connect(url) as conn:
        rows = conn.execute(PG_COLUMNS).fetchall()
    return {
        Column(table, name, bool(nullable), int(position))
        for (table, name, nullable, position) in rows
        if not table.startswith(POSTGRES_OWN)
    }


def _by_table(columns: set[Column]) -> dict[str, list[Column]]:
    tables: dict[str, list[Column]] = {}
    for column in sorted(columns):
        tables.setdefault(column.table, []).append(column)
    return tables


def test_sqlite_and_postgresql_ledgers_have_the_same_schema(tmp_path: Path, pg_url: str) -> None:
    sqlite_file = tmp_path / "runtime.db"
    _migrate(str(sqlite_file), tmp_path)
    _migrate(pg_url, tmp_path)  # a fresh schema, its search_path in the URL
    on_sqlite, on_postgres = _sqlite_columns(sqlite_file), _postgres_columns(pg_url)
    assert {c.table for c in on_sqlite} >= {"runs", "effects", "audit_events"}  # really read
    implicit = {c for c in on_postgres if c.name == "rowid" and _has_rowid(sqlite_file, c.table)}
    sqlite_tables, postgres_tables = _by_table(on_sqlite), _by_table(on_postgres - implicit)
    assert sorted(sqlite_tables) == sorted(postgres_tables)
    for table, columns in sqlite_tables.items():
        assert columns == postgres_tables[table], table
