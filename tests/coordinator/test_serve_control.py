"""``serve``'s bookkeeping of the runs it holds and of its control connection."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from agentctl.coordinator.creation import owner_identity
from agentctl.coordinator.serve import (
    Held,
    ServeOptions,
    _reconnect,
    _Serve,
    drive_failure,
    hold,
    release,
)
from agentctl.coordinator.workerpool import open_worker_pool
from agentctl.errors import LeaseLostError
from agentctl.ledger import open_ledger
from agentctl.ledger.queue import ClaimedRun


def test_a_run_claimed_again_stays_held_when_its_earlier_drive_ends() -> None:
    # Our own lease expired while the database was out of reach, and we claimed the run again.
    async def main() -> None:
        held: Held = {}
        first, second = ClaimedRun("run-h", 1, False), ClaimedRun("run-h", 2, True)
        earlier, later = trio.CancelScope(), trio.CancelScope()
        hold(held, first, earlier)
        hold(held, second, later)
        assert earlier.cancel_called and not later.cancel_called
        release(held, first)  # the earlier drive ends: the later claim is still held
        assert held["run-h"][0].token == 2
        release(held, second)
        assert held == {}

    trio.run(main)


def test_serve_keeps_its_sqlite_control_connection_when_a_call_fails(tmp_path: Path) -> None:
    # Reopening the file would drop the POSIX locks of every connection of this process.
    db = str(tmp_path / "ledger.db")

    async def main() -> None:
        control = open_ledger(db, verify=False)
        try:
            async with open_worker_pool(1) as pool:
                serve = _Serve(ServeOptions(db), control, owner_identity(), "host:1", pool)
                await _reconnect(serve)
                assert serve.control is control
                assert not control.queue_busy("2026-12-01T00:00:00Z")  # still open
        finally:
            control.close()

    trio.run(main)


def test_an_unexpected_error_is_reported_for_its_drive_alone() -> None:
    # A bug in one drive must not cancel the serve's other drives: it is that drive's error.
    boom = ExceptionGroup("drive", [ExceptionGroup("tasks", [KeyError("k")])])
    assert drive_failure(boom) == ("error", "internal error: KeyError: 'k'")
    assert drive_failure(ValueError("v")) == ("error", "internal error: ValueError: v")
    lost = LeaseLostError("run r: taken over", run_id="r")
    assert drive_failure(ExceptionGroup("drive", [lost])) == ("lost", "run r: taken over")
    with pytest.raises(KeyboardInterrupt):  # not an error of the drive: it stops the serve
        drive_failure(KeyboardInterrupt())
