"""``Transactions``: how a backend opens, retries and ends the ledger's transactions.

The one seam between the backend-neutral ledger (``service.LedgerService``, the artifact
store, garbage collection) and a database driver. A backend supplies one object with these
methods; everything above it runs the same ``*_txn`` functions on whatever ``Db`` it hands
out.

Invariants:
- ``run_write(body)`` runs ``body`` inside one write transaction and commits it; a backend
  whose transactions may fail for concurrency alone (PostgreSQL's serialization failures)
  rolls back and runs ``body`` again, a bounded number of times, so ``body`` must do nothing
  outside the database that a second run would repeat wrongly (content-addressed blob files
  and crash points are fine). Every exception rolls back and propagates;
- ``run_flag_write(body)`` is ``run_write`` for a body that only raises a flag on rows a busy
  coordinator rewrites every step (a run's cancel flag): a backend whose serialized writes
  would keep failing against such a writer runs it at a level that waits for the row instead
  (PostgreSQL: READ COMMITTED), so it cannot be starved;
- ``run_read(body)`` runs ``body`` over one consistent snapshot and writes nothing;
- ``transaction()`` / ``read()`` are the same transactions as context managers, run once,
  for the few callers that hold a file lock around them (artifact store, GC);
- driver errors leave these methods only as ``agentctl.errors``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol, TypeVar

from agentctl.ledger.sql import Db

T = TypeVar("T")


class Transactions(Protocol):
    """One open connection to a ledger and the transactions it runs; one caller at a time."""

    @property
    def artifacts_root(self) -> Path:
        """The content-addressed artifact directory that goes with this ledger."""
        ...

    @property
    def database_file(self) -> Path | None:
        """The SQLite file this ledger lives in (None on a server): the other ledgers in its
        directory share its artifact store (``artifacts/siblings.py``)."""
        ...

    def run_write(self, body: Callable[[Db], T]) -> T: ...

    def run_flag_write(self, body: Callable[[Db], T]) -> T: ...

    def run_read(self, body: Callable[[Db], T]) -> T: ...

    def transaction(self) -> AbstractContextManager[Db]: ...

    def read(self) -> AbstractContextManager[Db]: ...

    def close(self) -> None: ...
