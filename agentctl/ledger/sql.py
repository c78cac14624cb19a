"""The SQL surface the ledger's statement modules use: a connection, its cursor, its rows.

The modules under ``agentctl.ledger`` are written against these protocols, not against a
driver, so one set of transaction functions serves every backend: ``sqlite3`` connections
satisfy them as they are, and a PostgreSQL backend supplies an adapter that does.

Invariants:
- a row is read by column name or position (``row["state"]``, ``row[0]``) and lists its
  names with ``keys()``; its values are the driver's plain Python values (``str``, ``int``,
  ``float``, ``bytes``, ``None``).
- parameters are positional ``?`` placeholders; an adapter for a driver with another
  placeholder style translates them.
- nothing here commits: transaction boundaries belong to the backend (``connection.py`` for
  SQLite), never to a statement module.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

SqlParam = str | int | float | None
Params = Sequence[SqlParam]


class Row(Protocol):
    """One result row: by column name or position; ``keys()`` lists the names in order."""

    def __getitem__(self, key: int | str, /) -> Any: ...

    def keys(self) -> list[str]: ...


class Cursor(Protocol):
    """The result of one statement."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Db(Protocol):
    """A connection inside a transaction that its backend opened and will end."""

    def execute(self, sql: str, parameters: Params = (), /) -> Cursor: ...

    def executemany(self, sql: str, seq_of_parameters: Iterable[Params], /) -> Cursor: ...


def dialect_of(conn: Db) -> str:
    """``"sqlite"`` or ``"postgresql"``: for the few statements whose SQL differs by backend.

    An adapter for another backend names its dialect in a ``dialect`` attribute; a plain
    ``sqlite3`` connection has none.
    """
    return str(getattr(conn, "dialect", "sqlite"))
