"""Open compensation runs in the source snapshot, and the creating transaction's refusal of a
compensation run whose inverse an open one of the same source still holds (two ``compensate``
invocations that planned at the same time must not both run it)."""

from __future__ import annotations

from typing import Any

import pytest
from ledger_helpers import make_run, new_run, ts

from agentctl.errors import BlockedError
from agentctl.ledger.lifecycle import read_source, refuse_held_inverses_txn
from agentctl.ledger.runs import set_run_state_txn


def _second(ledger: Any, tasks: tuple[str, ...]) -> None:
    run = new_run("run-c2", mode="compensation", source_run_id="run-src")
    with ledger.transaction() as conn:
        refuse_held_inverses_txn(conn, run, tasks)


def test_an_open_compensation_run_holds_its_pending_inverses(ledger: Any) -> None:
    make_run(ledger, "run-src", ("make", "verify"))
    make_run(ledger, "run-c1", ("make--compensate",), mode="compensation", source_run_id="run-src")
    with ledger.transaction() as conn:
        held = read_source(conn, "run-src").open_compensations
    assert [(h.run_id, h.task_id, h.state) for h in held] == [
        ("run-c1", "make--compensate", "pending")
    ]
    with pytest.raises(BlockedError, match="run-c1"):
        _second(ledger, ("make--compensate",))
    _second(ledger, ("other--compensate",))  # an inverse nobody holds


def test_an_ended_compensation_run_holds_nothing(ledger: Any) -> None:
    make_run(ledger, "run-src", ("make", "verify"))
    make_run(ledger, "run-c1", ("make--compensate",), mode="compensation", source_run_id="run-src")
    with ledger.transaction() as conn:
        set_run_state_txn(conn, "run-c1", "cancelled", ts(1))
    with ledger.transaction() as conn:
        assert read_source(conn, "run-src").open_compensations == ()
    _second(ledger, ("make--compensate",))
