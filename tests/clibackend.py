"""Where a black-box CLI test keeps its runs: SQLite files, or databases on PostgreSQL.

The CLI suite (tests/cli) runs every test once per backend. A test names its ledger the way a
user of the SQLite default does — no ``--db`` (``.agentctl/runtime.db`` under the working
directory) or ``--db PATH`` — and its ``LedgerTarget`` turns that into the command line and
environment of the backend under test:

- ``sqlite``: the command line as written;
- ``postgresql``: each distinct database file the test would have used becomes its own fresh
  database on the session's server (``tests.pgserver``): the default through ``AGENTCTL_DB``,
  an explicit ``--db PATH`` rewritten to ``--db URL``; artifact bytes go where SQLite keeps
  them, beside the file (``AGENTCTL_ARTIFACTS``), so tests that look at them look at the same
  place. A ``--db`` value that is a URL, empty, or an existing file or directory is left as
  written: such tests exercise the path checks (or a file the test made on purpose).

Invariants: two paths that differ are two databases, as two files are; one path is one
database for the whole test; every database made here is dropped when the test ends.
A test that depends on SQLite itself (file modes, WAL, header bytes, encryption, file sizes)
is marked ``@pytest.mark.sqlite_only(reason=...)`` and gets no PostgreSQL variant. A test that
edits or reads ledger rows directly (making a run look old, say) does it through
``LedgerTarget.sql`` with portable SQL, so it runs on both.
"""

from __future__ import annotations

import os
import re
import sqlite3
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.pgserver import PgServer

BACKENDS = ("sqlite", "postgresql")
SqlParam = str | int | float | None
DEFAULT_DB = Path(".agentctl") / "runtime.db"
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def agentctl_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentctl", *args]


@dataclass(frozen=True)
class Invocation:
    """One CLI process as the backend under test runs it: agentctl's arguments, environment."""

    args: list[str]
    env: dict[str, str]

    @property
    def argv(self) -> list[str]:
        return agentctl_argv(*self.args)


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without any AGENTCTL_ setting, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCTL_")}
    env.update(extra or {})
    return env


def _db_file(value: str, cwd: Path) -> Path:
    return Path(os.path.abspath(cwd / value))


class LedgerTarget:
    """The SQLite backend: command lines run as written."""

    backend = "sqlite"

    def invocation(
        self, args: Sequence[str], cwd: Path, env: dict[str, str] | None = None
    ) -> Invocation:
        return Invocation(list(args), cli_env(env))

    def sql(
        self, db_file: Path, statement: str, params: Sequence[SqlParam] = ()
    ) -> list[tuple[Any, ...]]:
        """Run one statement (``?`` placeholders) on the ledger standing for ``db_file`` (an
        absolute path), committed; its rows, if any."""
        conn = sqlite3.connect(db_file)
        try:
            with conn:
                return [tuple(row) for row in conn.execute(statement, params).fetchall()]
        finally:
            conn.close()

    def close(self) -> None:
        """Nothing to clean up: the files live in the test's tmp_path."""


class PgLedgerTarget(LedgerTarget):
    """The PostgreSQL backend: each database file the test names is a database on ``server``."""

    backend = "postgresql"

    def __init__(self, server: PgServer) -> None:
        self._server = server
        self._names: dict[Path, str] = {}

    def url_for(self, db_file: Path) -> str:
        """The database standing for ``db_file`` (an absolute path), made on first use."""
        if db_file not in self._names:
            self._names[db_file] = self._server.create_database()
        return self._server.url_of(self._names[db_file])

    def invocation(
        self, args: Sequence[str], cwd: Path, env: dict[str, str] | None = None
    ) -> Invocation:
        argv, db_file = self._rewrite(list(args), cwd)
        extra = dict(env or {})
        if db_file is None and "AGENTCTL_DB" not in extra:
            db_file = _db_file(str(DEFAULT_DB), cwd)
            extra["AGENTCTL_DB"] = self.url_for(db_file)
        if db_file is not None:
            extra.setdefault("AGENTCTL_ARTIFACTS", str(db_file.parent / "artifacts"))
        return Invocation(argv, cli_env(extra))

    def _rewrite(self, args: list[str], cwd: Path) -> tuple[list[str], Path | None]:
        """``args`` with a database file's ``--db PATH`` as ``--db URL``; that file (or None)."""
        out: list[str] = []
        db_file: Path | None = None
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "--":
                out.extend(args[i:])
                break
            name, eq, inline = arg.partition("=")
            value = inline if eq else (args[i + 1] if i + 1 < len(args) else None)
            if name != "--db" or value is None or not self._mappable(value, cwd):
                out.append(arg)
                i += 1
                continue
            db_file = _db_file(value, cwd)
            out.extend(["--db", self.url_for(db_file)])
            i += 1 if eq else 2
        return out, db_file

    def sql(
        self, db_file: Path, statement: str, params: Sequence[SqlParam] = ()
    ) -> list[tuple[Any, ...]]:
        import psycopg  # lazily, as in tests.pgserver

        with psycopg.connect(self.url_for(_db_file(str(db_file), Path.cwd()))) as conn:
            cursor = conn.execute(statement.replace("?", "%s"), params)
            return [tuple(row) for row in cursor.fetchall()] if cursor.description else []

    def _mappable(self, value: str, cwd: Path) -> bool:
        """A ``--db`` value naming a database file yet to be made (see the module docstring)."""
        if not value.strip() or _URL.match(value):
            return False
        path = _db_file(value, cwd)
        return path in self._names or not path.exists()

    def close(self) -> None:
        for name in self._names.values():
            self._server.drop_database(name)
        self._names.clear()
