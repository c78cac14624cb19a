"""A look at a ledger file that changes nothing: ``agentctl doctor``'s database check.

Job: say whether the database at a path exists, is an agentctl ledger this version can open,
which schema version it has, and whether ``run`` could create or write it — without
creating, migrating or locking anything.

Invariants:
- a missing file stays missing: no parent directory, no file, no ``.lock`` is created;
- nothing is written: the file is opened read-only. When no ``-wal`` companion exists the
  file holds every committed change, so it is opened ``immutable`` — SQLite then creates no
  ``-wal`` / ``-shm`` either; when a ``-wal`` exists (another process has the ledger open,
  or one died) read-only mode reads it through the companions that are already there;
- writability is judged with ``os.access`` alone (permissions, ``chattr +i``, a read-only
  mount), as ``run`` would meet it: an existing file must be readable and writable and its
  directory writable (``run`` keeps ``-wal``, ``-shm`` and ``.lock`` beside it); a missing
  file needs its nearest existing ancestor to be a writable directory (``run`` makes the
  missing parents, then the file). No test file is written to find out;
- the answer is data (``DatabaseProbe``), never an exception: a file that cannot be read is
  reported as not openable with the reason, one ``run`` cannot write as not writable.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, replace
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
    writable: bool = True  # `run` can create it (a missing file) or write it where it is

    @property
    def available(self) -> bool:
        """``run`` can use it: an openable ledger (or none yet) it can create or write."""
        return self.openable and self.writable

    @property
    def status(self) -> str:
        if not self.writable:
            return "not_writable"
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
            "writable": self.writable,
            "status": self.status,
            "detail": self.detail,
        }


def probe_database(path: str) -> DatabaseProbe:
    """Open ``path`` read-only (never creating it) and report what it holds."""
    if is_postgres_url(path):
        return _probe_server(path)
    file = Path(path)
    if not _exists(file):
        obstacle = _create_obstacle(file)
        if obstacle is not None:
            why = f"does not exist, and `run` cannot create it: {obstacle}"
            return replace(_probe(path, False, True, None, why), writable=False)
        return _probe(path, False, True, None, "does not exist yet; `run` creates it")
    found = _look(path, file)
    obstacle = _write_obstacle(file) if found.openable else None
    if obstacle is None:
        return found
    why = f"{found.detail}; `run` cannot write it: {obstacle}"
    return replace(found, writable=False, detail=why)


def _look(path: str, file: Path) -> DatabaseProbe:
    """What the existing file at ``path`` holds, read without writing."""
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


def _exists(file: Path) -> bool:
    """Whether ``file`` is there (through a link, as ``run`` opens it). A path this user may
    not even look at counts as there: reading it then says why it cannot be used."""
    try:
        file.stat()
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True
    return True


def _can_write_in(directory: Path) -> bool:
    """New entries (files, companions, subdirectories) can be made in ``directory``."""
    return os.access(directory, os.W_OK | os.X_OK)


def _create_obstacle(file: Path) -> str | None:
    """Why ``run`` could not create the missing ``file`` and its missing parents, or None."""
    # os.path answers False where it may not look: the search goes on up to a directory it can.
    ancestor = next((p for p in file.absolute().parents if os.path.exists(p)), None)
    if ancestor is None or not os.path.isdir(ancestor):
        return f"{ancestor or file.parent} is not a directory"
    if not _can_write_in(ancestor):
        return f"directory {ancestor} is not writable by this user"
    return None


def _write_obstacle(file: Path) -> str | None:
    """Why ``run`` could not write the existing ``file``, or the companions it keeps beside
    it (those of the path as given, and of the file a symbolic link names), or None."""
    if not os.access(file, os.R_OK | os.W_OK):
        return "the file is not writable by this user"
    for directory in dict.fromkeys((file.absolute().parent, file.resolve().parent)):
        if not _can_write_in(directory):
            why = "(`run` keeps -wal, -shm, .lock there)"
            return f"directory {directory} is not writable by this user {why}"
    return None


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
