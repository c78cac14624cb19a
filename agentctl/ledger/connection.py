"""Opening the SQLite ledger and running transactions against it.

This module is the one boundary where ``sqlite3`` errors become ``agentctl.errors``: every
transaction and read goes through :func:`translate_errors`.

Invariants:
- ``open_database`` refuses a database newer than supported *before* it changes anything: the
  version is read from the file header bytes, then again from a fresh connection, and only
  then are journal mode and other persistent settings touched. A refused file keeps its bytes.
- a file that is not an agentctl ledger is never taken over: a non-SQLite file, an SQLite file
  with another ``application_id``, or one with ``user_version`` 0 that already has tables (or
  a versioned one without our ``runs`` table, or one at v5 or later without our
  ``application_id``) is refused with exit 5 before journal mode,
  schema or mode are touched — first from the header bytes, then again over SQL (a WAL file
  may hold what the header does not show yet). Ledgers carry ``APPLICATION_ID`` from schema
  v5 on; older ledgers of ours are recognised by their ``runs`` table and get it on migration;
- the database file (and its -wal/-shm companions) are created with mode 0600; SQLite gives
  the companions the main file's mode, and we chmod them again where they exist.
- an encrypted ledger (``ledger/crypto.py``) is opened with its key before migrations run;
  a missing or wrong key is exit 5 and nothing is written.
- every connection runs WAL, ``synchronous=FULL``, ``foreign_keys=ON`` and a busy timeout
  (5 s by default); writes use ``BEGIN IMMEDIATE`` so a writer takes the lock up front.
- first-time setup (creating the file, switching it to WAL, migrating) is serialised across
  processes by an exclusive file lock ``<db>.lock`` (0600, ``ledger/setup_lock.py``).
  Switching a fresh rollback-mode file to WAL upgrades a read lock to a write lock, and SQLite
  answers two processes doing that at once with an immediate SQLITE_BUSY that no busy timeout
  waits out; under the lock only one process converts the file and the others find it done.
  A file whose header already says WAL at the wanted version needs no setup and takes no lock
  (the common, hot path).
- a ledger that does not exist yet is built aside, in a private temporary file next to it
  (``.<name>.new-<pid>``): WAL, the current schema in one transaction (``ledger/fresh.py``;
  every migration step while that script is stale), with no flush at all while it is
  built; then the complete file is flushed once, renamed onto ``path`` and the directory
  flushed. ``path`` thus appears complete or not at all, for 2 flushes instead of ~18 (the
  journal-mode switch and each migration step each flushed). A creator killed before the
  rename leaves only its aside files, which the next creator removes under the setup lock;
  an empty file at ``path`` (or a symlink) is set up in place as before.
- a ``path`` that is (or passes through) a symlink names the file it resolves to, as SQLite
  reads it (its ``-wal`` and ``-shm`` sit beside the real file): the ledger's own companions
  — the setup lock, the artifact store, the worker registry — sit beside that real file too,
  so every spelling of one database shares them and a backup of its directory holds them.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from agentctl.crashpoints import CrashPoint, crash_point
from agentctl.errors import (
    AgentctlError,
    FutureVersionError,
    LockTimeoutError,
    PersistenceError,
    from_os_error,
)
from agentctl.ledger.crypto import LedgerConnection, attach_if_encrypted
from agentctl.ledger.fresh import create_current
from agentctl.ledger.migrations import (
    APPLICATION_ID,
    MARKED_FROM_VERSION,
    SUPPORTED_SCHEMA_VERSION,
    MigrationResult,
    migrate,
)
from agentctl.ledger.setup_lock import setup_lock

T = TypeVar("T")
DEFAULT_BUSY_TIMEOUT_MS = 5000
_SQLITE_MAGIC = b"SQLite format 3\x00"
_WAL_FORMAT = 2  # header bytes 18/19 (write/read format version) are 2 in WAL mode


_SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_NOTADB = 11, 13, 26
CORRUPT_HINT = (
    "stop using this file; restore the database (with its -wal) and artifacts/ from a backup "
    "(docs/operations.md, Backups)"
)


def corrupt_error(path: Path | None, detail: str) -> PersistenceError:
    return PersistenceError(
        f"database {path or ''} is corrupt: {detail}; nothing more was written to it",
        data={"hint": CORRUPT_HINT},
    )


@contextlib.contextmanager
def translate_errors(
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS, path: Path | None = None
) -> Iterator[None]:
    """Turn sqlite3 errors raised inside the block into agentctl errors (exit 5).

    The one classification of SQLite failures: locked, disk full, corrupt, anything else.
    """
    try:
        yield
    except sqlite3.Error as exc:
        raise translated_error(exc, busy_timeout_ms, path) from exc


def translated_error(exc: sqlite3.Error, busy_timeout_ms: int, path: Path | None) -> AgentctlError:
    """The agentctl error an sqlite3 error stands for (``translate_errors``' classification)."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF  # the primary result code
    text = str(exc).lower()
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        return LockTimeoutError(
            f"the database stayed locked for more than {busy_timeout_ms / 1000:g} s "
            f"(another agentctl process holds it): {exc}"
        )
    if code == _SQLITE_FULL:
        return from_os_error(OSError(errno.ENOSPC, str(exc)), f"database {path}")
    if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return corrupt_error(path, str(exc))
    if "no such function: agentctl_" in text:
        # The encryption triggers call a function only a connection holding the key has: this
        # connection was opened before `db encryption enable` ran in another process.
        return PersistenceError(
            f"database {path} was encrypted after this process opened it (`db encryption "
            "enable` from another shell); this write was refused and nothing of it was stored. "
            "Run the command again with the key set. A run it was driving may have an effect "
            "it had started and could not record: reconcile it (`agentctl effects list RUN`, "
            "then `agentctl effects reconcile`), then `agentctl resume` with the key set"
        )
    return PersistenceError(f"database error ({path}): {exc}")


def _read_header(path: Path) -> bytes | None:
    """The 100-byte SQLite header, read without opening the file through SQLite.

    None for a missing or empty file (a ledger to create); a non-empty file that is not
    SQLite is refused here, before anything could write to it.
    """
    try:
        with path.open("rb") as fh:
            header = fh.read(100)
    except FileNotFoundError:
        return None
    if not header:
        return None
    if len(header) < 100 or not header.startswith(_SQLITE_MAGIC):
        raise PersistenceError(
            f"{path} is not an SQLite database, so not an agentctl ledger; refusing to use it "
            "(choose another --db)"
        )
    return header


def _foreign(path: Path, why: str) -> PersistenceError:
    return PersistenceError(
        f"{path} is not an agentctl ledger ({why}); refusing to take it over — "
        "it was left unchanged (choose another --db)"
    )


def _refuse_foreign(path: Path, app_id: int, version: int, has: Callable[[str], bool]) -> None:
    """Refuse a SQLite file of another program; ``has(table)`` says whether it has tables."""
    if app_id not in (0, APPLICATION_ID):
        raise _foreign(path, f"its application_id is {app_id:#x}")
    _refuse_future(version, path)
    if app_id == 0 and version == 0 and has(""):
        raise _foreign(path, "it has tables of its own and no agentctl schema version")
    if app_id == 0 and version > 0 and not has("runs"):
        raise _foreign(path, f"schema version {version} but no agentctl runs table")
    if app_id == 0 and version >= MARKED_FROM_VERSION:  # ours carry the id from then on
        raise _foreign(path, f"schema version {version} without agentctl's application_id")


def _refuse_foreign_header(path: Path, header: bytes) -> None:
    """The header-only check: application id (bytes 68-71), version, schema cookie (40-43)."""
    app_id = int.from_bytes(header[68:72], "big")
    cookie = int.from_bytes(header[40:44], "big")

    def has(table: str) -> bool:
        # A changed schema cookie means tables were created; whether a versioned file has
        # our runs table the header cannot say, so that is left to the SQL check.
        return bool(cookie) if not table else True

    _refuse_foreign(path, app_id, _header_version(header), has)


def _refuse_foreign_sql(conn: sqlite3.Connection, path: Path) -> None:
    (app_id,) = conn.execute("PRAGMA application_id").fetchone()
    (version,) = conn.execute("PRAGMA user_version").fetchone()

    def has(table: str) -> bool:
        sql = "SELECT 1 FROM sqlite_schema WHERE type = 'table'" + (" AND name = ?" * bool(table))
        return conn.execute(sql, (table,) if table else ()).fetchone() is not None

    _refuse_foreign(path, int(app_id), int(version), has)


def _header_version(header: bytes) -> int:
    """``PRAGMA user_version`` as stored in the header."""
    return int.from_bytes(header[60:64], "big", signed=True)


def _already_set_up(header: bytes | None, goal: int) -> bool:
    """Whether the header says the file is already WAL at ``goal``: no setup, no setup lock.

    The header can lag a WAL database (a migration may sit in the ``-wal`` file); a stale
    header only sends the opener down the locked path, which re-checks everything.
    """
    if header is None:
        return False
    wal = header[18] == _WAL_FORMAT and header[19] == _WAL_FORMAT
    return wal and _header_version(header) >= goal


def _refuse_future(found: int, path: Path) -> None:
    if found > SUPPORTED_SCHEMA_VERSION:
        raise FutureVersionError(
            f"database {path} has schema {found}, newer than supported "
            f"{SUPPORTED_SCHEMA_VERSION}; upgrade agentctl to open it"
        )


class _WriteTransaction:
    """``Database.transaction``: a class, not a generator context manager, since it runs on
    every effect step (a generator's enter and exit cost several times a plain call's)."""

    __slots__ = ("db",)

    def __init__(self, db: Database) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        try:
            self.db.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._translated(exc) from exc
        return self.db.conn

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, _tb: object
    ) -> None:
        conn = self.db.conn
        try:
            if kind is None:
                conn.execute("COMMIT")
                return
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.Error as err:
            raise self._translated(err) from err
        if isinstance(exc, sqlite3.Error):
            raise self._translated(exc) from exc

    def _translated(self, exc: sqlite3.Error) -> AgentctlError:
        return translated_error(exc, self.db.busy_timeout_ms, self.db.path)


def _private_file(path: Path) -> None:
    """Create ``path`` as 0600 if missing, so SQLite's companions inherit that mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)


def chmod_private(path: Path) -> None:
    for candidate in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(candidate, 0o600)


class Database:
    """One open SQLite connection to a ledger file; used by one thread at a time."""

    def __init__(
        self,
        path: Path,
        conn: sqlite3.Connection,
        busy_timeout_ms: int,
        migration: MigrationResult,
    ) -> None:
        self.path = path  # as the user spelled it: what messages name
        self.real_path = Path(os.path.realpath(path))  # where SQLite keeps it (docstring)
        self.conn = conn
        self.busy_timeout_ms = busy_timeout_ms
        self.migration = migration  # what opening did: ``db migrate`` reports it

    def transaction(self) -> _WriteTransaction:
        """``BEGIN IMMEDIATE`` … ``COMMIT``; any exception rolls back and propagates."""
        return _WriteTransaction(self)

    @contextlib.contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A deferred read transaction: every query in the block sees one snapshot."""
        with translate_errors(self.busy_timeout_ms, self.path):
            self.conn.execute("BEGIN")
            try:
                yield self.conn
            finally:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")

    @property
    def artifacts_root(self) -> Path:
        """The artifact store beside the (real) database file."""
        return self.real_path.parent / "artifacts"

    @property
    def database_file(self) -> Path | None:
        """This ledger's own file: the store's other ledgers are the files beside it."""
        return self.path

    def run_write(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """``body`` in one ``transaction()``: one writer at a time, so never retried."""
        with self.transaction() as conn:
            return body(conn)

    def run_flag_write(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """``run_write``: SQLite's one writer at a time cannot starve a short write."""
        return self.run_write(body)

    def run_read(self, body: Callable[[sqlite3.Connection], T]) -> T:
        with self.read() as conn:
            return body(conn)

    def close(self) -> None:
        with translate_errors(self.busy_timeout_ms, self.path):
            self.conn.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(
    path: Path, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS, *, verify: bool = False
) -> sqlite3.Connection:
    """A raw connection with the session pragmas; checks the file (foreign, future version,
    and with ``verify`` corrupt pages) before anything could write to it."""
    conn = sqlite3.connect(
        # Absolute: SQLite reads the bare name ":memory:" as a private in-memory database,
        # not the file of that name this ledger was created as (its writes would vanish).
        os.path.abspath(path),
        timeout=busy_timeout_ms / 1000,
        isolation_level=None,
        check_same_thread=False,
        factory=LedgerConnection,  # plain sqlite3 until an encrypted ledger attaches its key
    )
    try:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        _refuse_foreign_sql(conn, path)
        if verify:
            _refuse_corrupt(conn, path)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
    except BaseException:
        conn.close()
        raise
    return conn


def _refuse_corrupt(conn: sqlite3.Connection, path: Path) -> None:
    """``PRAGMA quick_check``: every page and index structure, O(size) but no row compare."""
    found = [str(row[0]) for row in conn.execute("PRAGMA quick_check(5)")]
    if found != ["ok"]:
        raise corrupt_error(path, "; ".join(found))


def _fsync(path: Path, flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _aside_files(db: Path) -> list[Path]:
    """Every file a creator of ``db`` may have left (its own pid's included)."""
    return sorted(db.parent.glob(f".{glob.escape(db.name)}.new-*"))


def _create_aside(db: Path, target_version: int | None) -> MigrationResult:
    """Build the new ledger ``db`` aside and rename it into place (module docstring).

    Runs under the setup lock, with ``db`` absent. No flush is needed while building: until
    the rename nothing refers to the file, and a crash leaves only aside files to remove.
    A failure (a full disk) removes them at once.
    """
    for leftover in _aside_files(db):
        leftover.unlink(missing_ok=True)
    aside = db.with_name(f".{db.name}.new-{os.getpid()}")
    try:
        migration = _build(aside, target_version)
        _fsync(aside)
        crash_point(CrashPoint.LEDGER_NEW_BEFORE_RENAME)
        os.rename(aside, db)
    except BaseException:
        for leftover in _aside_files(db):
            leftover.unlink(missing_ok=True)
        raise
    crash_point(CrashPoint.LEDGER_NEW_AFTER_RENAME)
    _fsync(db.parent, os.O_RDONLY | os.O_DIRECTORY)
    return migration


def _build(path: Path, target_version: int | None) -> MigrationResult:
    """A complete ledger in the new private file ``path``, every page in the main file."""
    _private_file(path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("PRAGMA journal_mode = WAL")
        # The current schema in one transaction (``fresh``); an older target, or a script
        # older than the migration steps, replays them.
        created = None if target_version is not None else create_current(conn)
        migration = created or migrate(conn, target_version)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()  # the last connection: SQLite removes the (empty) -wal and -shm
    return migration


def _connect_and_migrate(
    db: Path, busy_timeout_ms: int, target_version: int | None, verify: bool
) -> tuple[sqlite3.Connection, MigrationResult]:
    created = None
    if not os.path.lexists(db):  # checked again under the setup lock: another may have won
        created = _create_aside(db, target_version)
    _private_file(db)
    conn = connect(db, busy_timeout_ms, verify=verify and created is None)
    try:
        # An encrypted ledger opens only with its key, checked before any migration writes.
        attach_if_encrypted(conn)
        return conn, created or migrate(conn, target_version)
    except BaseException:
        conn.close()
        raise


def open_sibling(db: Database) -> Database:
    """Another connection to the open ledger ``db``, for a second user in this process.

    Opened through SQLite only: ``open_database`` reads the header and touches the file with
    plain ``open``/``close``, and closing any descriptor of a file drops every POSIX lock this
    process holds on it — the open connections' locks included. SQLite would then believe
    another process's connection is the last one, checkpoint and reset the WAL under them,
    and their later commits would be lost or torn. SQLite's own opens keep those locks.
    """
    with translate_errors(db.busy_timeout_ms, db.path):
        conn = connect(db.path, db.busy_timeout_ms)
        try:
            attach_if_encrypted(conn)
        except BaseException:
            conn.close()
            raise
    return Database(db.path, conn, db.busy_timeout_ms, db.migration)


def open_database(
    path: str | os.PathLike[str],
    *,
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    target_version: int | None = None,
    verify: bool = True,
) -> Database:
    """Open (creating and migrating as needed) the ledger database at ``path``.

    ``verify`` runs ``PRAGMA quick_check`` before anything is written (corrupt → exit 5);
    plain reads pass False to stay fast on large files (they still fail cleanly, exit 5,
    on any corrupt page they touch). ``target_version`` stops migration early (tests only).
    """
    db = Path(path)
    try:
        header = _read_header(db)
    except OSError as exc:
        raise from_os_error(exc, f"database {db}") from exc
    if header is not None:
        _refuse_foreign_header(db, header)
    goal = SUPPORTED_SCHEMA_VERSION if target_version is None else target_version
    try:
        with translate_errors(busy_timeout_ms, db):
            if _already_set_up(header, goal):
                conn, migration = _connect_and_migrate(db, busy_timeout_ms, target_version, verify)
            else:
                real = Path(os.path.realpath(db))  # one lock for every spelling of the file
                real.parent.mkdir(parents=True, exist_ok=True)
                with setup_lock(real):
                    conn, migration = _connect_and_migrate(
                        db, busy_timeout_ms, target_version, verify
                    )
    except AgentctlError:
        raise
    except OSError as exc:
        raise from_os_error(exc, f"database {db}") from exc
    chmod_private(db)
    return Database(db, conn, busy_timeout_ms, migration)
