"""``SqliteLedger``: the SQLite implementation of ``RunLedger`` (DESIGN.md §5).

The methods are ``LedgerService``'s, the same for every backend; SQLite supplies only how a
transaction runs — ``connection.Database``: ``BEGIN IMMEDIATE`` for writes (one writer at a
time, so no transaction is ever retried), a deferred snapshot for reads — and the few
answers that are SQLite's own: its file as ``location``, file statistics, the migration
that opening did, and column encryption (SQLite triggers, ``ledger/encryption.py``).
The artifact store sits beside the database file (``<db dir>/artifacts``).
Invariant: no ``sqlite3`` object, row or connection is returned to the caller.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from agentctl.ledger.connection import (
    DEFAULT_BUSY_TIMEOUT_MS,
    Database,
    open_database,
    open_sibling,
)
from agentctl.ledger.migrations import MigrationResult
from agentctl.ledger.service import LedgerService

if TYPE_CHECKING:  # the methods that need them load them: a run uses none
    import agentctl.ledger.encryption as encryption
    import agentctl.ledger.stats as stats
    from agentctl.ledger.queue import Fence


class SqliteLedger(LedgerService):
    """``RunLedger`` over one SQLite connection; one caller (thread) at a time."""

    def __init__(self, db: Database, fence: Fence | None = None) -> None:
        super().__init__(db, fence)
        self._db = db

    def open_fenced(self, fence: Fence) -> SqliteLedger:
        return SqliteLedger(open_sibling(self._db), fence)

    @property
    def location(self) -> Path:
        return self._db.real_path  # the worker registry sits beside the real file

    def database_stats(self) -> stats.DatabaseStats:
        import agentctl.ledger.stats as stats

        return self._db.run_read(lambda conn: stats.database_stats(conn, self._db.path))

    def migration(self) -> MigrationResult:
        return self._db.migration

    def encryption_inventory(self) -> encryption.EncryptionReport:
        import agentctl.ledger.encryption as encryption

        return self._db.run_read(lambda conn: encryption.inventory(conn))

    def change_encryption(self, change: encryption.EncryptionChange) -> encryption.EncryptionReport:
        import agentctl.ledger.encryption as encryption

        return encryption.change_encryption(self._db, change)


def open_sqlite_ledger(
    path: str | os.PathLike[str],
    *,
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    target_version: int | None = None,
    verify: bool = True,
) -> SqliteLedger:
    """Open (creating and migrating as needed) the ledger at ``path``; use it as a context
    manager so the connection closes. ``verify`` (default) quick-checks the file before any
    write; read-only commands pass False. ``target_version`` is for tests of older schemas."""
    db = open_database(
        path, busy_timeout_ms=busy_timeout_ms, target_version=target_version, verify=verify
    )
    return SqliteLedger(db)
