"""``FencedTransactions``: the transaction runner of a ledger opened for one claimed run.

A ``serve`` drives each claimed run through a ledger whose runner is this wrapper around the
backend's own (``runner.Transactions``). It is the one place the fencing token is checked:
every write transaction — ``run_write`` bodies and the artifact store's ``transaction()``
blocks alike — first checks that the run's ``lease_token`` is still the claim's, inside the
same transaction (``queue.check_fence``), so a coordinator whose lease was taken over commits
nothing. Reads pass through unchecked: reading a run one no longer owns harms nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from agentctl.ledger.queue import Fence, check_fence
from agentctl.ledger.runner import Transactions
from agentctl.ledger.sql import Db

T = TypeVar("T")


class FencedTransactions:
    """``inner``'s transactions, each write first checking ``fence``."""

    def __init__(self, inner: Transactions, fence: Fence) -> None:
        self._inner = inner
        self._fence = fence

    @property
    def artifacts_root(self) -> Path:
        return self._inner.artifacts_root

    @property
    def database_file(self) -> Path | None:
        return self._inner.database_file

    def run_write(self, body: Callable[[Db], T]) -> T:
        def fenced(conn: Db) -> T:
            check_fence(conn, self._fence)
            return body(conn)

        return self._inner.run_write(fenced)

    def run_flag_write(self, body: Callable[[Db], T]) -> T:
        def fenced(conn: Db) -> T:
            check_fence(conn, self._fence)
            return body(conn)

        return self._inner.run_flag_write(fenced)

    def run_read(self, body: Callable[[Db], T]) -> T:
        return self._inner.run_read(body)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Db]:
        with self._inner.transaction() as conn:
            check_fence(conn, self._fence)
            yield conn

    def read(self) -> contextlib.AbstractContextManager[Db]:
        return self._inner.read()

    def close(self) -> None:
        self._inner.close()
