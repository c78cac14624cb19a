"""Runs: creation, lookup, state changes, cancellation and the ownership lease."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import psutil
import pytest
from ledger_helpers import T0, make_run, ts

from agentctl.errors import InvalidOperationError, NotFoundError, OwnershipError, ValidationError
from agentctl.ledger.audit import list_audit, list_checkpoints
from agentctl.ledger.budget import budget_snapshot
from agentctl.ledger.connection import Database
from agentctl.ledger.leases import (
    acquire_run_lease_txn,
    has_live_owner,
    local_holder,
    release_run_lease_txn,
)
from agentctl.ledger.owners import process_start_time
from agentctl.ledger.runs import (
    find_run,
    get_run,
    is_cancel_requested,
    list_runs,
    raise_cancel_flag_txn,
    record_cancel_request_txn,
    set_run_state_txn,
    wall_time_exceeded,
)
from agentctl.ledger.tasks import list_tasks
from tests.ledger.owner_fixtures import FakeBoot, fake_boot

__all__ = ["fake_boot"]


def test_create_run_writes_run_tasks_budget_audit_checkpoint(ledger: Database) -> None:
    make_run(ledger, tasks=("b", "a", "c"), limits={"maxToolCalls": 3})
    with ledger.read() as conn:
        run = get_run(conn, "run-1")
        assert (run.state, run.mode, run.created_at) == ("running", "execute", T0)
        assert run.inputs == {"x": 1} and run.working_memory == {"count": 0}
        tasks = list_tasks(conn, "run-1")
        assert [(t.task_id, t.position, t.state) for t in tasks] == [
            ("b", 0, "pending"),
            ("a", 1, "pending"),
            ("c", 2, "pending"),
        ]
        assert budget_snapshot(conn, "run-1").limits == {"toolCalls": 3}
        assert [e.event_type for e in list_audit(conn, "run-1")] == ["run.created"]
        assert len(list_checkpoints(conn, "run-1")) == 1
    assert run.to_json()["cancellationRequested"] is False


def test_run_state_transitions_are_validated(ledger: Database) -> None:
    make_run(ledger)
    with ledger.transaction() as conn:
        set_run_state_txn(conn, "run-1", "paused", ts(1))
        set_run_state_txn(conn, "run-1", "running", ts(2))
        set_run_state_txn(conn, "run-1", "succeeded", ts(3), output={"done": True})
    with pytest.raises(InvalidOperationError), ledger.transaction() as conn:
        set_run_state_txn(conn, "run-1", "running", ts(4))  # terminal is immutable
    with ledger.read() as conn:
        run = get_run(conn, "run-1")
        assert (run.state, run.output, run.updated_at) == ("succeeded", {"done": True}, ts(3))
        events = [e.event_type for e in list_audit(conn, "run-1")]
        assert events == ["run.created", "run.paused", "run.running", "run.succeeded"]
        assert len(list_checkpoints(conn, "run-1")) == 4
    with pytest.raises(NotFoundError), ledger.transaction() as conn:
        set_run_state_txn(conn, "nope", "failed", ts(5))


def test_cancel_only_for_running_or_paused(ledger: Database) -> None:
    make_run(ledger)
    with ledger.read() as conn:
        assert not is_cancel_requested(conn, "run-1")
    with ledger.transaction() as conn:
        raise_cancel_flag_txn(conn, "run-1", ts(1))
        record_cancel_request_txn(conn, "run-1", ts(1))
    with ledger.read() as conn:
        assert is_cancel_requested(conn, "run-1")
        assert get_run(conn, "run-1").updated_at == ts(1)
        assert list_audit(conn, "run-1")[-1].event_type == "run.cancellation_requested"
    with ledger.transaction() as conn:
        set_run_state_txn(conn, "run-1", "cancelled", ts(2))
    with pytest.raises(NotFoundError), ledger.transaction() as conn:
        raise_cancel_flag_txn(conn, "run-1", ts(3))
    with pytest.raises(NotFoundError), ledger.transaction() as conn:
        raise_cancel_flag_txn(conn, "run-missing", ts(3))


def test_find_by_prefix_and_list_newest_first(ledger: Database) -> None:
    make_run(ledger, "run-abcdef01", now=ts(1))
    make_run(ledger, "run-abcdef02", now=ts(2))
    make_run(ledger, "run-xyzxyz00", now=ts(3))
    with ledger.transaction() as conn:
        set_run_state_txn(conn, "run-xyzxyz00", "failed", ts(4))
    with ledger.read() as conn:
        assert find_run(conn, "run-xyzxyz").run_id == "run-xyzxyz00"
        assert find_run(conn, "run-abcdef01").run_id == "run-abcdef01"
        with pytest.raises(ValidationError):
            find_run(conn, "run-abcdef")
        with pytest.raises(NotFoundError):
            find_run(conn, "run-qqqqqq")
        # Shorter than the kind and 6 characters, a prefix matches nothing — not even the one
        # run it would name: an unset `$RUN` must never cancel whatever run is alone.
        for short in ("", " ", "r", "run", "run-", "run-xyzxy"):
            with pytest.raises(NotFoundError):
                find_run(conn, short)
        assert [r.run_id for r in list_runs(conn)] == [
            "run-xyzxyz00",
            "run-abcdef02",
            "run-abcdef01",
        ]
        assert [r.run_id for r in list_runs(conn, state="running", limit=1)] == ["run-abcdef02"]
        assert set(list_runs(conn)[0].summary_json()) == {
            "runId",
            "state",
            "mode",
            "workflow",
            "createdAt",
            "updatedAt",
            "parentRunId",
            "sourceRunId",
        }


def test_wall_time_counts_from_durable_creation(ledger: Database) -> None:
    make_run(ledger, now=T0)
    with ledger.read() as conn:
        run = get_run(conn, "run-1")
    assert not wall_time_exceeded(run, 60, ts(60))
    assert wall_time_exceeded(run, 60, ts(61))


@pytest.fixture
def other_process() -> Iterator[psutil.Process]:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield psutil.Process(child.pid)
    finally:
        child.kill()
        child.wait()


def _me() -> tuple[int, float]:
    return os.getpid(), process_start_time(os.getpid())


def test_lease_refused_while_another_owner_lives(
    ledger: Database, other_process: psutil.Process
) -> None:
    make_run(ledger)
    with ledger.transaction() as conn:
        acquire_run_lease_txn(conn, "run-1", other_process.pid, other_process.create_time(), T0)
    pid, created = _me()
    with pytest.raises(OwnershipError) as info, ledger.transaction() as conn:
        acquire_run_lease_txn(conn, "run-1", pid, created, ts(1))
    assert f"pid {other_process.pid}" in info.value.message
    assert "agentctl cancel run-1" in info.value.message
    other_process.kill()
    other_process.wait()
    with ledger.transaction() as conn:  # the owner is dead now: take over
        acquire_run_lease_txn(conn, "run-1", pid, created, ts(2))
    with ledger.read() as conn:
        assert get_run(conn, "run-1").owner_pid == pid


def test_a_live_owner_keeps_its_lease_across_a_clock_step(
    ledger: Database, other_process: psutil.Process, fake_boot: FakeBoot
) -> None:
    """The wall clock is stepped (simulated) while the owner runs: another process must still
    see it alive and be refused the run."""
    make_run(ledger)
    owner = other_process.pid
    with ledger.transaction() as conn:
        acquire_run_lease_txn(conn, "run-1", owner, process_start_time(owner), T0)
    fake_boot.step(-13)
    with ledger.read() as conn:
        assert has_live_owner(conn, "run-1")
    pid, created = _me()
    with pytest.raises(OwnershipError), ledger.transaction() as conn:
        acquire_run_lease_txn(conn, "run-1", pid, created, ts(1))
    with ledger.read() as conn:
        assert get_run(conn, "run-1").owner_pid == owner


def test_lease_with_reused_pid_is_stale(ledger: Database, other_process: psutil.Process) -> None:
    make_run(ledger)
    with ledger.transaction() as conn:  # same pid, different start time: a recycled pid
        acquire_run_lease_txn(conn, "run-1", other_process.pid, 12.5, T0)
    pid, created = _me()
    with ledger.transaction() as conn:
        acquire_run_lease_txn(conn, "run-1", pid, created, ts(1))
        acquire_run_lease_txn(conn, "run-1", pid, created, ts(2))  # re-entrant for the owner
        release_run_lease_txn(conn, "run-1", other_process.pid, ts(3))  # not the owner: no-op
    with ledger.read() as conn:
        assert get_run(conn, "run-1").owner_pid == pid
    with ledger.transaction() as conn:
        release_run_lease_txn(conn, "run-1", pid, ts(4))
    with ledger.read() as conn:
        assert get_run(conn, "run-1").owner_pid is None


def test_a_local_lease_of_another_host_is_never_judged_dead_here(ledger: Database) -> None:
    """On a shared (PostgreSQL) ledger a `run` on host B must not lose its lease to a
    `resume` on host A, which cannot see B's processes: the lease names its host."""
    make_run(ledger)
    with ledger.transaction() as conn:  # a pid no process here has: dead, were it local
        conn.execute(
            "UPDATE runs SET owner_pid = ?, owner_create_time = ?, lease_holder = ?"
            " WHERE run_id = 'run-1'",
            (2**22 + 7, 12.5, f"host-b.example:{2**22 + 7}"),
        )
    pid, created = _me()
    with pytest.raises(OwnershipError) as info, ledger.transaction() as conn:
        acquire_run_lease_txn(conn, "run-1", pid, created, ts(1))
    assert "host-b.example" in info.value.message
    with ledger.read() as conn:
        assert has_live_owner(conn, "run-1")
    with ledger.transaction() as conn:  # the same lease written by this host: judged here
        conn.execute(
            "UPDATE runs SET lease_holder = ? WHERE run_id = 'run-1'",
            (local_holder(2**22 + 7),),
        )
        acquire_run_lease_txn(conn, "run-1", pid, created, ts(2))
    with ledger.read() as conn:
        assert get_run(conn, "run-1").owner_pid == pid
