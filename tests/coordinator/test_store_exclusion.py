"""The store never lets an inline short transaction use the ledger connection while a
threaded call holds it or waits for it (the one-connection invariant of store.py)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import trio

from agentctl.coordinator.store import Store
from agentctl.ledger.opening import open_ledger


async def test_an_inline_call_waits_for_a_threaded_call_in_flight(tmp_path: Path) -> None:
    with open_ledger(str(tmp_path / "runtime.db")) as ledger:
        await _inline_waits(Store(ledger))


async def _inline_waits(store: Store) -> None:
    in_thread = threading.Event()
    seen_busy: list[bool] = []

    def long_read() -> None:
        in_thread.set()
        time.sleep(0.3)  # the connection is this thread's until it returns
        in_thread.clear()

    def short_write() -> None:
        seen_busy.append(in_thread.is_set())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(store._run, long_read)
        while not in_thread.is_set():
            await trio.sleep(0.001)
        await store._run_short(short_write)
    assert seen_busy == [False]


async def test_an_inline_call_runs_at_once_when_the_connection_is_free(tmp_path: Path) -> None:
    ran_on: list[threading.Thread] = []
    with open_ledger(str(tmp_path / "runtime.db")) as ledger:
        await Store(ledger)._run_short(lambda: ran_on.append(threading.current_thread()))
    assert ran_on == [threading.current_thread()]
