"""A psycopg 3 connection as ``ledger.sql.Db``, and psycopg's errors as agentctl's.

Invariants:
- the statement modules' SQL runs unchanged: ``?`` and ``?N`` placeholders become psycopg's
  ``%s`` (``?N`` reordering the parameters), a literal ``%`` is escaped, and a ``?`` inside a
  quoted string is left alone; each distinct statement is translated once (cached);
- parameters: a Python ``bool`` is bound as an integer (the schema stores flags as integers),
  a ``str`` as ``text`` (so a bare ``?`` in a select list has a type);
- rows are readable by column name and position and list their names with ``keys()``;
  ``numeric`` values (PostgreSQL's result of integer arithmetic on ``bigint``) come back as
  ``int`` or ``float``, never ``Decimal``;
- ``translate_errors`` is the one classification of psycopg failures; a message never holds
  the URL's password, raw or percent-decoded, nor any ``password=`` value
  (``core.dburl.redact``/``scrub`` applied to the whole message).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.types.string import StrDumper

from agentctl.core.dburl import redact, scrub
from agentctl.errors import LockTimeoutError, NotFoundError, PersistenceError
from agentctl.ledger.sql import Params, SqlParam

RETRYABLE_SQLSTATES = frozenset({"40001", "40P01"})  # serialization failure, deadlock


class PgRow:
    """One result row: ``row["name"]``, ``row[0]``, ``keys()``, iteration."""

    __slots__ = ("_index", "_values")

    def __init__(self, values: Sequence[Any], index: dict[str, int]) -> None:
        self._values = values
        self._index = index

    def __getitem__(self, key: int | str, /) -> Any:
        if isinstance(key, str):
            return self._values[self._index[key]]
        return self._values[key]

    def keys(self) -> list[str]:
        return list(self._index)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


def _row_factory(cursor: psycopg.Cursor[Any]) -> Any:
    names = [column.name for column in cursor.description or ()]
    index = {name: i for i, name in enumerate(names)}
    return lambda values: PgRow(values, index)


class _NumericLoader(Loader):
    """``numeric`` as ``int`` when integral, else ``float`` (as SQLite returns them)."""

    def load(self, data: Buffer) -> int | float:
        text = bytes(data).decode("ascii")
        return float(text) if any(c in text for c in ".eEn") else int(text)


@functools.lru_cache(maxsize=1024)
def translate_sql(sql: str) -> tuple[str, tuple[int, ...] | None]:
    """``sql`` with psycopg placeholders, and for ``?N`` the parameter order (0-based)."""
    out: list[str] = []
    order: list[int] = []
    numbered = False
    quoted = False
    i = 0
    while i < len(sql):
        ch = sql[i]
        if ch == "'":
            quoted = not quoted
        if ch == "%":
            out.append("%%")
        elif ch == "?" and not quoted:
            j = i + 1
            while j < len(sql) and sql[j].isdigit():
                j += 1
            numbered = numbered or j > i + 1
            # SQLite's rule: a bare ``?`` takes the number after the largest so far.
            order.append(int(sql[i + 1 : j]) - 1 if j > i + 1 else max(order, default=-1) + 1)
            out.append("%s")
            i = j
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out), (tuple(order) if numbered else None)


def _bind(parameters: Params, order: tuple[int, ...] | None) -> list[SqlParam]:
    values = [int(p) if isinstance(p, bool) else p for p in parameters]
    return values if order is None else [values[i] for i in order]


class PgDb:
    """The ``Db`` the statement modules see, over one psycopg connection in a transaction."""

    dialect = "postgresql"

    def __init__(self, conn: psycopg.Connection[Any], artifacts_root: Path | None = None) -> None:
        self.conn = conn
        self.artifacts_root = artifacts_root  # where large values spill (artifacts/values.py)

    def execute(self, sql: str, parameters: Params = (), /) -> psycopg.Cursor[Any]:
        text, order = translate_sql(sql)
        return self.conn.execute(text, _bind(parameters, order))

    def executemany(self, sql: str, seq_of_parameters: Iterable[Params], /) -> psycopg.Cursor[Any]:
        text, order = translate_sql(sql)
        cursor = self.conn.cursor()
        rows = [_bind(p, order) for p in seq_of_parameters]
        if rows:
            cursor.executemany(text, rows)
        return cursor


def configure(conn: psycopg.Connection[Any]) -> None:
    """Row factory and adapters every ledger connection uses."""
    conn.row_factory = _row_factory
    conn.adapters.register_dumper(str, StrDumper)
    conn.adapters.register_loader("numeric", _NumericLoader)


@contextlib.contextmanager
def translate_errors(url: str) -> Iterator[None]:
    """psycopg errors raised in the block as agentctl errors (exit 5), the URL redacted."""
    try:
        yield
    except psycopg.Error as exc:
        raise classify(exc, url) from exc


def classify(exc: psycopg.Error, url: str) -> PersistenceError:
    """``exc`` as an agentctl error; no password of ``url`` (in any form) is in its message."""
    found = _classified(exc, url)
    return type(found)(scrub(found.message, url))  # the kind kept, the message scrubbed


def _classified(exc: psycopg.Error, url: str) -> PersistenceError:
    shown = redact(url)
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if exc.sqlstate in RETRYABLE_SQLSTATES or isinstance(exc, pg_errors.LockNotAvailable):
        return LockTimeoutError(
            f"database {shown}: concurrent transactions kept conflicting ({detail}); try again"
        )
    # libpq's connection failures carry no SQLSTATE: the server's words tell them apart.
    text = str(exc)
    if isinstance(exc, pg_errors.InvalidCatalogName) or (
        "database" in text and "does not exist" in text
    ):
        return NotFoundError(f"database {shown} does not exist (create it first)")
    if isinstance(exc, pg_errors.InvalidAuthorizationSpecification | pg_errors.InvalidPassword) or (
        "authentication failed" in text
    ):
        return PersistenceError(f"database {shown} refused the credentials: {detail}")
    if isinstance(exc, psycopg.OperationalError) and exc.sqlstate is None:
        return PersistenceError(f"cannot connect to database {shown}: {detail}")
    return PersistenceError(f"database error ({shown}): {detail}")
