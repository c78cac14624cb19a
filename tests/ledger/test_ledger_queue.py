"""The run queue in the ledger, on SQLite and PostgreSQL: claims, tokens, heartbeats, fencing.

Every test uses the ``run_ledger`` fixture (both backends) and a second, fenced ledger opened
from it the way ``serve`` opens one per claimed run (``open_fenced``).
"""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from ledger_helpers import new_run, ts

from agentctl.errors import InvalidOperationError, LeaseLostError, OwnershipError
from agentctl.ledger import LedgerService
from agentctl.ledger.model import CancelRun, Owner
from agentctl.ledger.owners import process_start_time
from agentctl.ledger.queue import ClaimedRun, ClaimRequest, Fence, Heartbeat

A, B = Owner(1001, 1.0), Owner(1002, 2.0)


def _submit(led: LedgerService, run_id: str, at: int = 0) -> None:
    led.submit_run(replace(new_run(run_id), state="queued"), ("a", "b"), ts(at))


def _claim(
    led: LedgerService, owner: Owner, now: int, limit: int = 10, lease: int = 5
) -> tuple[ClaimedRun, ...]:
    holder = f"host:{owner.pid}"
    return led.claim_runs(ClaimRequest(holder, owner, limit, ts(now + lease), ts(now)))


def test_a_queued_run_is_claimed_once_with_a_rising_token(run_ledger: LedgerService) -> None:
    _submit(run_ledger, "run-q1")
    _submit(run_ledger, "run-q2", at=1)
    assert run_ledger.get_run("run-q1").state == "queued"
    (first,) = _claim(run_ledger, A, 2, limit=1)  # oldest first
    assert (first.run_id, first.token, first.takeover) == ("run-q1", 1, False)
    assert run_ledger.get_run("run-q1").state == "running"
    (second,) = _claim(run_ledger, B, 3)  # q1 is held: only q2 is left
    assert second.run_id == "run-q2"
    assert _claim(run_ledger, B, 4) == ()  # both held, neither expired
    assert run_ledger.queue_busy(ts(4))


def test_an_expired_lease_is_taken_over_and_the_old_holder_is_fenced(
    run_ledger: LedgerService,
) -> None:
    _submit(run_ledger, "run-t")
    (claimed,) = _claim(run_ledger, A, 1, lease=5)
    old = run_ledger.open_fenced(Fence("run-t", claimed.token))
    try:
        old.set_run_state("run-t", "paused", ts(2))  # a fenced write while the lease holds
        old.set_run_state("run-t", "running", ts(3))
        assert run_ledger.heartbeat(Heartbeat((Fence("run-t", 1),), ts(20), ts(4))) == ()
        assert _claim(run_ledger, B, 10) == ()  # extended to 20: still held
        (taken,) = _claim(run_ledger, B, 21)
        assert (taken.token, taken.takeover) == (2, True)
        with pytest.raises(LeaseLostError, match="token 1"):
            old.set_run_state("run-t", "paused", ts(22))
        # The heartbeat finds it lost too; nothing of the old holder committed.
        assert run_ledger.heartbeat(Heartbeat((Fence("run-t", 1),), ts(30), ts(22))) == ("run-t",)
        assert run_ledger.get_run("run-t").state == "running"
    finally:
        old.close()


def test_resume_refuses_a_live_serve_lease_and_fences_an_expired_one(
    run_ledger: LedgerService,
) -> None:
    _submit(run_ledger, "run-r")
    (claimed,) = _claim(run_ledger, A, 1, lease=5)
    with pytest.raises(OwnershipError, match="host:1001"):
        run_ledger.claim_for_resume("run-r", B, ts(3))
    run_ledger.claim_for_resume("run-r", B, ts(7))  # expired: a local resume takes it
    fenced = run_ledger.open_fenced(Fence("run-r", claimed.token))
    try:
        with pytest.raises(LeaseLostError):
            fenced.set_run_state("run-r", "paused", ts(8))
    finally:
        fenced.close()
    assert _claim(run_ledger, A, 9) == ()  # a local owner's run is never claimed
    assert not run_ledger.queue_busy(ts(9))


def test_cancel_of_a_queued_run_cancels_it_at_once(run_ledger: LedgerService) -> None:
    _submit(run_ledger, "run-c")
    assert run_ledger.request_cancel("run-c", ts(1)).state == "cancelled"
    assert _claim(run_ledger, A, 2) == () and not run_ledger.queue_busy(ts(2))


def test_resume_refuses_a_queued_run_and_leaves_it_to_serve(run_ledger: LedgerService) -> None:
    _submit(run_ledger, "run-rq")
    with pytest.raises(InvalidOperationError, match=r"queued: it waits for an `agentctl serve`"):
        run_ledger.claim_for_resume("run-rq", B, ts(1))
    assert run_ledger.get_run("run-rq").state == "queued"
    (claimed,) = _claim(run_ledger, A, 2)  # no local lease was taken: one driver, the serve
    assert (claimed.run_id, claimed.takeover) == ("run-rq", False)


def test_cancel_of_a_handed_back_run_cancels_it_at_once(run_ledger: LedgerService) -> None:
    _submit(run_ledger, "run-hb")
    (claimed,) = _claim(run_ledger, A, 1)
    fenced = run_ledger.open_fenced(Fence("run-hb", claimed.token))
    try:  # a stopping serve hands the run back: still running, no owner
        fenced.cancel_run(CancelRun("run-hb", "running", ts(2), A.pid, ()))
    finally:
        fenced.close()
    assert run_ledger.request_cancel("run-hb", ts(3)).state == "cancelled"
    assert {t.state for t in run_ledger.load_source("run-hb").tasks} == {"cancelled"}
    assert _claim(run_ledger, B, 4) == () and not run_ledger.queue_busy(ts(4))


def test_a_queued_run_some_process_holds_is_not_claimed(run_ledger: LedgerService) -> None:
    """A queued run under a local lease (a live process of this host) is never claimed:
    a serve taking it would make two drivers."""
    _submit(run_ledger, "run-held")
    me = Owner(os.getpid(), process_start_time(os.getpid()))
    run_ledger.acquire_lease("run-held", me, ts(1))
    assert _claim(run_ledger, A, 2) == ()
    run_ledger.release_lease("run-held", me.pid, ts(3))
    (claimed,) = _claim(run_ledger, A, 4)
    assert claimed.run_id == "run-held"
