"""A lease owner's identity is read the same way by the process that writes it and the one
that checks it, agrees with psutil's reading (which older leases were written with), and
survives a wall-clock step (simulated: a fake ``/proc/stat`` whose btime moves)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from agentctl.ledger import boot_anchor
from agentctl.ledger.owners import TOLERANCE_S, owner_alive, process_start_time
from tests.ledger.owner_fixtures import FakeBoot, fake_boot, sleeper

__all__ = ["fake_boot"]

STEP_S = 13  # what this VM's clock was seen to jump


def _since_boot(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    return float(fields[19]) / os.sysconf("SC_CLK_TCK")


def test_start_time_agrees_with_psutil_for_this_process_and_a_child(fake_boot: FakeBoot) -> None:
    child = sleeper()
    try:
        for pid in (psutil.Process().pid, child.pid):
            assert abs(process_start_time(pid) - psutil.Process(pid).create_time()) < TOLERANCE_S
    finally:
        child.kill()
        child.wait()


def test_live_owner_is_alive_only_with_its_own_start_time(fake_boot: FakeBoot) -> None:
    child = sleeper()
    try:
        started = process_start_time(child.pid)
        assert owner_alive(child.pid, started)
        assert owner_alive(child.pid, None)
        # The same pid with another start time is a reused pid: not the owner.
        assert not owner_alive(child.pid, started - 5.0)
    finally:
        child.kill()
        child.wait()


def test_a_zombie_or_reaped_owner_is_dead(fake_boot: FakeBoot) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    started = process_start_time(child.pid)
    # Not yet reaped: the exited child is a zombie until wait().
    deadline = time.monotonic() + 30
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not owner_alive(child.pid, started)
    child.wait()
    assert not owner_alive(child.pid, started)


@pytest.mark.parametrize("step", [STEP_S, -STEP_S])
def test_a_live_owner_stays_alive_across_a_clock_step(fake_boot: FakeBoot, step: int) -> None:
    owner = sleeper()
    time.sleep(0.05)  # a few clock ticks: the later process's start differs from the owner's
    later = sleeper()
    try:
        assert _since_boot(later.pid) > _since_boot(owner.pid)
        started = process_start_time(owner.pid)
        fake_boot.step(step)
        assert owner_alive(owner.pid, started)
        assert process_start_time(owner.pid) == started
        # A process that started later (what a reused pid would be) is not the owner, on
        # either side of the step: its pid with the owner's start time is not alive.
        assert not owner_alive(later.pid, started)
        fake_boot.step(0)
        assert not owner_alive(later.pid, started)
    finally:
        for proc in (owner, later):
            proc.kill()
            proc.wait()


def test_a_dead_owner_is_dead_after_a_clock_step(fake_boot: FakeBoot) -> None:
    owner = sleeper()
    started = process_start_time(owner.pid)
    owner.kill()
    owner.wait()
    fake_boot.step(STEP_S)
    assert not owner_alive(owner.pid, started)


def test_a_value_of_the_old_formula_stays_alive(fake_boot: FakeBoot) -> None:
    """An older agentctl wrote the start since boot + the btime of its day. This boot's
    anchor was taken before a step; the old value was written after it and is still alive."""
    fake_boot.anchor_file(os.geteuid()).write_text(f"{fake_boot.btime - STEP_S}\n")
    owner = sleeper()
    try:
        old_formula = psutil.Process(owner.pid).create_time()
        assert abs(process_start_time(owner.pid) - (old_formula - STEP_S)) < TOLERANCE_S
        assert owner_alive(owner.pid, old_formula)
        assert not owner_alive(owner.pid, old_formula + 1.0)
    finally:
        owner.kill()
        owner.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="starts a process as another user")
def test_another_users_owner_is_read_with_that_users_anchor(fake_boot: FakeBoot) -> None:
    """Two users share a ledger; the clock was stepped between their first runs of the boot,
    and again since: the other user's owner is still alive, read with its own anchor."""
    assert boot_anchor.boot_anchor() == fake_boot.btime  # this user's, at its first read
    nobody = 65534
    theirs = fake_boot.anchor_file(nobody)
    theirs.write_text(f"{fake_boot.btime - STEP_S}\n")
    os.chown(theirs, nobody, nobody)
    owner = subprocess.Popen(["sleep", "60"], user=nobody)
    try:
        written = _since_boot(owner.pid) + fake_boot.btime - STEP_S
        fake_boot.step(2 * STEP_S)
        assert owner_alive(owner.pid, written)
        assert not owner_alive(owner.pid, written + 1.0)
    finally:
        owner.kill()
        owner.wait()
