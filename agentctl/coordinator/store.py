"""The coordinator's async door to the ledger: one connection, one thread at a time.

Invariants: every ledger call runs in a worker thread behind a capacity-1 limiter, so the one
sqlite3 connection is never used concurrently; a write runs inside ``BEGIN IMMEDIATE`` …
``COMMIT`` and is not abandoned when the caller is cancelled (a commit in flight finishes, so
what the ledger says is always what happened).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import trio

from agentctl.ledger.connection import Ledger

T = TypeVar("T")


class Store:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._limiter = trio.CapacityLimiter(1)

    async def write(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(conn, *args)`` in one immediate transaction."""

        def work() -> T:
            with self.ledger.transaction() as conn:
                return fn(conn, *args)

        return await trio.to_thread.run_sync(work, limiter=self._limiter)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(ledger, *args)`` in the ledger thread; ``fn`` manages its own transactions."""
        return await trio.to_thread.run_sync(lambda: fn(self.ledger, *args), limiter=self._limiter)

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        def work() -> T:
            with self.ledger.read() as conn:
                return fn(conn, *args)

        return await trio.to_thread.run_sync(work, limiter=self._limiter)
