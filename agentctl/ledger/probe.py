"""A look at a ledger file that changes nothing: ``agentctl doctor``'s database check.

Job: say whether the database at a path exists, is an agentctl ledger this version can open,
and which schema version it has — without creating, migrating or locking anything.

Invariants:
- a missing file stays missing: no parent directory, no file, no ``.lock`` is created;
- nothing is written: the file is opened read-only. When no ``-wal`` companion exists the
  file holds every committed change, so it is opened ``immutable`` — SQLite then creates no
  ``-wal`` / ``-shm`` either; when a ``-wal`` exists (another process has the ledger open,
  or one died) read-only mode reads it through the companions that are already there;
- the answer is data (``DatabaseProbe``), never an exception: a file that cannot be read is
  reported as not openable with the reason.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from agentctl.core.dburl import is_postgres_url, redact
from agentctl.core.jsonvalue import JsonObject
from agentctl.errors import AgentctlError
from agentctl.ledger.migrations import APPLICATION_ID, SUPPORTED_SCHEMA_VERSION

_SQLITE_MAGIC = b"SQLite format 3\x00"


@dataclass(frozen=True)
class DatabaseProbe:
    """What a read-only look at a ledger file found."""

    path: str
    exists: bool
    openable: bool  # an agentctl ledger this version can open (a missing file: True)
    schema_version: int | None
    supported_version: int
    detail: str

    @property
    def status(self) -> str:
        if not self.exists:
            return "absent"
        if not self.openable:
            return "unusable"
        if (self.schema_version or 0) < self.supported_version:
            return "needs_migration"
        return "ok"

    def to_json(self) -> JsonObject:
        return {
            "path": self.path,
            "exists": self.exists,
            "openable": self.openable,
            "schemaVersion": self.schema_version,
            "supportedVersion": self.supported_version,
            "status": self.status,
            "detail": self.detail,
        }


def probe_database(path: str) -> DatabaseProbe:
    """Open ``path`` read-only (never creating it) and report what it holds."""
    if is_postgres_url(path):
        return _probe_server(path)
    file = Path(path)
    if not file.exists():
        return _probe(path, False, True, None, "does not exist yet; `run` creates it")
    try:
        with file.open("rb") as fh:
            header = fh.read(100)
    except OSError as exc:
        return _probe(path, True, False, None, f"cannot be read: {exc.strerror or exc}")
    if header and not header.startswith(_SQLITE_MAGIC):
        return _probe(path, True, False, None, "is not an SQLite database")
    try:
        version, app_id, has_runs = _read(file)
    except sqlite3.Error as exc:
        return _probe(path, True, False, None, f"cannot be opened read-only: {exc}")
    return _judge(path, version, app_id, has_runs)


def _probe_server(url: str) -> DatabaseProbe:
    """A PostgreSQL ledger's version, read in a read-only transaction; the URL redacted."""
    shown = redact(url)
    from agentctl.ledger.pg.adapter import translate_errors
    from agentctl.ledger.pg.schema import probe_version

    try:
        with translate_errors(url):
            version = probe_version(url, shown)
    except AgentctlError as exc:
        return _probe(shown, True, False, None, str(exc))
    if version is None:
        return _probe(shown, True, True, 0, "an empty database; `run` sets it up")
    if version < SUPPORTED_SCHEMA_VERSION:
        why = f"schema {version}; opening it migrates it to {SUPPORTED_SCHEMA_VERSION}"
        return _probe(shown, True, True, version, why)
    return _probe(shown, True, True, version, f"schema {version}, current")


def _read(file: Path) -> tuple[int, int, bool]:
    """(user_version, application_id, has a ``runs`` table), read without writing."""
    wal = file.with_name(file.name + "-wal")
    mode = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
    conn = sqlite3.connect(f"{file.resolve().as_uri()}?{mode}", uri=True)
    try:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        (app_id,) = conn.execute("PRAGMA application_id").fetchone()
        found = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'"
        ).fetchone()
    finally:
        conn.close()
    return int(version), int(app_id), found is not None


def _judge(path: str, version: int, app_id: int, has_runs: bool) -> DatabaseProbe:
    if version == 0 and not has_runs:
        return _probe(path, True, True, 0, "an empty SQLite file; `run` sets it up")
    if app_id not in (0, APPLICATION_ID) or not has_runs:
        return _probe(path, True, False, version, "an SQLite file that is not an agentctl ledger")
    if version > SUPPORTED_SCHEMA_VERSION:
        why = f"schema {version} is newer than supported {SUPPORTED_SCHEMA_VERSION}"
        return _probe(path, True, False, version, why + "; use a newer agentctl")
    if version < SUPPORTED_SCHEMA_VERSION:
        why = f"schema {version}; opening it migrates it to {SUPPORTED_SCHEMA_VERSION}"
        return _probe(path, True, True, version, why)
    return _probe(path, True, True, version, f"schema {version}, current")


def _probe(
    path: str, exists: bool, openable: bool, version: int | None, detail: str
) -> DatabaseProbe:
    return DatabaseProbe(path, exists, openable, version, SUPPORTED_SCHEMA_VERSION, detail)
