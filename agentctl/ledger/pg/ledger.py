"""``PgLedger``: ``RunLedger`` on PostgreSQL — ``LedgerService``'s methods, PostgreSQL's runner.

Transactions (docs/adr/0012-postgresql-transactions.md): every write runs at SERIALIZABLE, so
each ``*_txn`` composition behaves as if it ran alone, as under SQLite's single writer —
budget read-check-writes, gapless per-run audit and checkpoint sequences (``MAX + 1``), the
effect protocol's guarded state moves — with no change to the statement modules. The server
aborts a transaction that could break this with a serialization failure (or a deadlock); the
runner rolls it back and runs the body again, at most ``MAX_ATTEMPTS`` times with a short
randomised back-off, then gives up with ``LockTimeoutError`` (exit 5). Reads run at
REPEATABLE READ, read-only: one snapshot, never aborted for conflicts.

Invariants:
- no psycopg object crosses the ``RunLedger`` boundary; psycopg errors leave as
  ``agentctl.errors`` with the URL's password redacted (``adapter.translate_errors``);
- ``location`` is a host-local path (``.agentctl/postgresql-<host>-<port>-<db>`` under the
  working directory): per-host companions such as the worker registry (process ids) must
  never be shared between hosts, unlike the artifact directory, which must be.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from psycopg import IsolationLevel, sql

import agentctl.ledger.encryption as encryption
import agentctl.ledger.stats as stats
from agentctl.core.dburl import normalized, redact
from agentctl.errors import NotFoundError, ValidationError, from_os_error
from agentctl.ledger.migrations import MigrationResult
from agentctl.ledger.pg.adapter import (
    RETRYABLE_SQLSTATES,
    PgDb,
    classify,
    configure,
    translate_errors,
)
from agentctl.ledger.pg.schema import checked_version, set_up
from agentctl.ledger.queue import Fence
from agentctl.ledger.service import LedgerService
from agentctl.ledger.sql import Db

T = TypeVar("T")
MAX_ATTEMPTS = 40
CONNECT_TIMEOUT_S = 10
LOCAL_DIR = Path(".agentctl")  # host-local companions (worker registry), under the cwd
DEFAULT_ARTIFACTS = LOCAL_DIR / "artifacts"
_COUNT = sql.SQL("SELECT COUNT(*) FROM {}")


def _backoff(attempt: int) -> None:
    time.sleep(random.uniform(0, min(0.2, 0.002 * 2**attempt)))  # jitter, not security


class PgTransactions:
    """One psycopg connection and how ``LedgerService`` runs transactions on it."""

    def __init__(self, conn: psycopg.Connection[Any], url: str, artifacts_root: Path) -> None:
        self.conn = conn
        self.url = url
        self._artifacts_root = artifacts_root
        self._db = PgDb(conn, artifacts_root)

    @property
    def artifacts_root(self) -> Path:
        return self._artifacts_root

    @property
    def database_file(self) -> Path | None:
        return None  # a server's database: no file beside the store

    def _begin(
        self, write: bool, level: IsolationLevel = IsolationLevel.SERIALIZABLE
    ) -> contextlib.AbstractContextManager[psycopg.Transaction]:
        self.conn.isolation_level = level if write else IsolationLevel.REPEATABLE_READ
        self.conn.read_only = not write
        return self.conn.transaction()

    def run_write(self, body: Callable[[Db], T]) -> T:
        return self._run_write(body, IsolationLevel.SERIALIZABLE)

    def run_flag_write(self, body: Callable[[Db], T]) -> T:
        """READ COMMITTED: an UPDATE of a row a coordinator keeps rewriting waits for that
        writer's commit and applies to the new version, where a SERIALIZABLE one fails for as
        long as the coordinator is mid-transaction (nearly always, on a busy run)."""
        return self._run_write(body, IsolationLevel.READ_COMMITTED)

    def _run_write(self, body: Callable[[Db], T], level: IsolationLevel) -> T:
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                with self._begin(write=True, level=level):
                    return body(self._db)
            except psycopg.Error as exc:
                if exc.sqlstate not in RETRYABLE_SQLSTATES or attempt == MAX_ATTEMPTS:
                    raise classify(exc, self.url) from exc
            _backoff(attempt)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def run_read(self, body: Callable[[Db], T]) -> T:
        with translate_errors(self.url), self._begin(write=False):
            return body(self._db)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Db]:
        with translate_errors(self.url), self._begin(write=True):
            yield self._db

    @contextlib.contextmanager
    def read(self) -> Iterator[Db]:
        with translate_errors(self.url), self._begin(write=False):
            yield self._db

    def close(self) -> None:
        with translate_errors(self.url):
            self.conn.close()


class PgLedger(LedgerService):
    """``RunLedger`` over one PostgreSQL connection; one caller (thread) at a time."""

    def __init__(
        self, tx: PgTransactions, migration: MigrationResult, fence: Fence | None = None
    ) -> None:
        super().__init__(tx, fence)
        self._pg = tx
        self._migration = migration
        info = tx.conn.info
        name = f"postgresql-{info.host}-{info.port}-{info.dbname}".replace("/", "_")
        self._location = LOCAL_DIR.absolute() / name

    def open_fenced(self, fence: Fence) -> PgLedger:
        """A second connection for one claimed run (the run queue), its writes fenced."""
        sibling = PgTransactions(_connect(self._pg.url), self._pg.url, self._pg.artifacts_root)
        return PgLedger(sibling, self._migration, fence)

    @property
    def location(self) -> Path:
        return self._location

    def database_stats(self) -> stats.DatabaseStats:
        return self._pg.run_read(lambda conn: _database_stats(conn, redact(self._pg.url)))

    def migration(self) -> MigrationResult:
        return self._migration

    def encryption_inventory(self) -> encryption.EncryptionReport:
        raise ValidationError(encryption.ENCRYPTION_UNSUPPORTED)

    def change_encryption(self, change: encryption.EncryptionChange) -> encryption.EncryptionReport:
        raise ValidationError(encryption.ENCRYPTION_UNSUPPORTED)


def _database_stats(conn: Db, shown: str) -> stats.DatabaseStats:
    """Schema version, the server's version, the database's size and rows per table."""
    tables = conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename"
    ).fetchall()
    counts = {str(t[0]): _count_rows(conn, str(t[0])) for t in tables}
    meta = conn.execute("SELECT value FROM agentctl_meta WHERE name = 'schema_version'")
    size = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    server = str(conn.execute("SHOW server_version").fetchone()[0])
    version = int(meta.fetchone()[0])
    return stats.DatabaseStats(shown, version, int(size), counts, "postgresql", server)


def _count_rows(conn: Db, table: str) -> int:
    """Rows in ``table``, a name as the server holds it: quoted by psycopg, and run directly
    (the statement modules' placeholder translation would read a ``?`` in it as a parameter)."""
    assert isinstance(conn, PgDb)  # run_read hands this runner's own connection
    row: Any = conn.conn.execute(_COUNT.format(sql.Identifier(table))).fetchone()
    return int(row[0])


def _connect(url: str) -> psycopg.Connection[Any]:
    with translate_errors(url):
        conn = psycopg.connect(normalized(url), autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    configure(conn)
    return conn


def open_pg_ledger(
    url: str,
    *,
    artifacts: str | Path | None = None,
    create: bool = True,
    target_version: int | None = None,
) -> PgLedger:
    """Open the ledger in the database at ``url``, creating its schema when ``create`` (else a
    database without a ledger is ``NotFoundError``); the artifact directory is ``artifacts``
    (default ``.agentctl/artifacts`` under the working directory)."""
    conn = _connect(url)
    try:
        with translate_errors(url):
            if not create:
                with conn.transaction():
                    if checked_version(conn, redact(url)) is None:
                        raise NotFoundError(f"database {redact(url)} holds no agentctl ledger")
            migration = set_up(conn, redact(url), target_version)
    except BaseException:
        conn.close()
        raise
    root = Path(artifacts or DEFAULT_ARTIFACTS).absolute()
    try:
        for folder in (root, LOCAL_DIR):
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        conn.close()
        raise from_os_error(exc, f"artifact directory {root}") from exc
    return PgLedger(PgTransactions(conn, url, root), migration)
