"""A new ledger created at the current schema in one go is the same file migrations make.

``ledger/fresh.py`` runs the ``CREATE`` statements of ``fresh_schema.py`` instead of every
migration step. These tests build real SQLite files both ways and compare what SQLite
keeps: ``sqlite_master`` (every table, index and its SQL), ``application_id``,
``user_version``, and that no table holds a row.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import agentctl.ledger.fresh as fresh
from agentctl.ledger import SUPPORTED_SCHEMA_VERSION, open_sqlite_ledger
from agentctl.ledger.migrations import APPLICATION_ID, migrate

REGENERATE = "the migration steps changed: run `python -m agentctl.ledger.fresh` and commit"


def _shape(path: Path) -> dict[str, object]:
    """What SQLite keeps of a ledger's schema, and its row count per table."""
    conn = sqlite3.connect(path)
    try:
        master = conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
        ).fetchall()
        tables = [str(name) for kind, name, _, _ in master if kind == "table"]
        rows = {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
        return {
            "master": master,
            "application_id": conn.execute("PRAGMA application_id").fetchone()[0],
            "user_version": conn.execute("PRAGMA user_version").fetchone()[0],
            "rows": rows,
        }
    finally:
        conn.close()


def _migrated(path: Path) -> Path:
    """A file brought to the current version by every migration step, one by one."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        migrate(conn)
    finally:
        conn.close()
    return path


def test_the_script_is_generated_from_the_current_migration_steps() -> None:
    assert fresh.is_current(), REGENERATE


def test_a_fresh_file_has_exactly_the_migrated_schema(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "fresh.db", isolation_level=None)
    try:
        result = fresh.create_current(conn)
    finally:
        conn.close()
    assert result is not None, REGENERATE
    assert result.to_json() == {
        "from": 0,
        "to": SUPPORTED_SCHEMA_VERSION,
        "applied": list(range(1, SUPPORTED_SCHEMA_VERSION + 1)),
    }
    made, migrated = _shape(tmp_path / "fresh.db"), _shape(_migrated(tmp_path / "old.db"))
    assert made == migrated
    assert made["application_id"] == APPLICATION_ID
    assert made["user_version"] == SUPPORTED_SCHEMA_VERSION
    rows = made["rows"]
    assert isinstance(rows, dict) and {"runs", "task_states", "effects", "audit_events"} <= set(
        rows
    )


def test_opening_a_new_ledger_creates_it_at_the_migrated_schema(tmp_path: Path) -> None:
    with open_sqlite_ledger(tmp_path / "runtime.db") as ledger:
        report = ledger.migration().to_json()
    assert report["to"] == SUPPORTED_SCHEMA_VERSION
    assert _shape(tmp_path / "runtime.db") == _shape(_migrated(tmp_path / "old.db"))


def test_a_stale_script_is_not_used_and_the_steps_run_instead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A migration added after the script was generated: its digest no longer matches."""
    monkeypatch.setattr(fresh.fresh_schema, "MIGRATIONS_DIGEST", "0" * 64)
    conn = sqlite3.connect(tmp_path / "stale.db", isolation_level=None)
    try:
        assert fresh.create_current(conn) is None
        assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
    finally:
        conn.close()
    with open_sqlite_ledger(tmp_path / "runtime.db"):
        pass
    assert _shape(tmp_path / "runtime.db") == _shape(_migrated(tmp_path / "old.db"))


def test_the_generated_module_is_what_the_generator_writes() -> None:
    """``fresh_schema.py`` is the generator's output, untouched by hand."""
    text = Path(fresh.fresh_schema.__file__).read_text(encoding="utf-8")
    assert text == fresh.render_module(), REGENERATE


def test_a_new_ledger_is_built_from_the_script_not_by_the_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wiring: opening a new file never replays a migration step while the script is
    current (the other tests would pass with either path, both make the same file)."""
    import agentctl.ledger.connection as connection

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a new ledger replayed the migration steps")

    monkeypatch.setattr(connection, "migrate", refuse)
    with open_sqlite_ledger(tmp_path / "runtime.db") as ledger:
        assert ledger.migration().to_json()["to"] == SUPPORTED_SCHEMA_VERSION


def test_every_table_carries_a_row_format_version(tmp_path: Path) -> None:
    """migrations.py's invariant: each row says its layout's version."""
    conn = sqlite3.connect(tmp_path / "fresh.db", isolation_level=None)
    try:
        assert fresh.create_current(conn) is not None, REGENERATE
        tables = [
            str(row[0])
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        missing = [
            t
            for t in tables
            if "format_version" not in {c[1] for c in conn.execute(f'PRAGMA table_info("{t}")')}
        ]
    finally:
        conn.close()
    assert tables and not missing, missing
