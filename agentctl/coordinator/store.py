"""The coordinator's async door to the ledger: one connection, one thread at a time.

Invariants: every ledger call runs in a worker thread behind a capacity-1 limiter, so the one
sqlite3 connection is never used concurrently; a write runs inside ``BEGIN IMMEDIATE`` …
``COMMIT`` and is not abandoned when the caller is cancelled (a commit in flight finishes, so
what the ledger says is always what happened).
"""

from __future__ import annotations

import math
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


class GroupCommitter:
    """Commits effect outcomes as they arrive, several to a transaction under load.

    Each ``commit`` returns only once its outcome is durable, so confirmed results stay as
    early as possible; outcomes that arrive while a commit is in flight share the next one.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._send, self._recv = trio.open_memory_channel[
            tuple[tuple[Any, ...], trio.Event, list[BaseException]]
        ](math.inf)

    async def commit(self, finish: tuple[Any, ...]) -> None:
        done, errors = trio.Event(), list[BaseException]()
        await self._send.send((finish, done, errors))
        await done.wait()
        if errors:
            raise errors[0]

    def close(self) -> None:
        self._send.close()

    async def serve(self) -> None:
        from agentctl.coordinator.records import finish_many_txn

        async with self._recv:
            async for first in self._recv:
                group = [first]
                while True:
                    try:
                        group.append(self._recv.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                try:
                    await self.write_group(finish_many_txn, group)
                finally:
                    for _finish, done, _errors in group:
                        done.set()

    async def write_group(self, fn: Callable[..., Any], group: list[Any]) -> None:
        try:
            await self.store.write(fn, [finish for finish, _done, _errors in group])
        except BaseException as exc:
            for _finish, _done, errors in group:
                errors.append(exc)
            if not isinstance(exc, Exception):
                raise
