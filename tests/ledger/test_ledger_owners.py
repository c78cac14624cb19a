"""A lease owner's identity is read the same way by the process that writes it and the one
that checks it, and agrees with psutil's reading (which older leases were written with)."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from agentctl.ledger.owners import TOLERANCE_S, owner_alive, process_start_time


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_start_time_agrees_with_psutil_for_this_process_and_a_child() -> None:
    child = _sleeper()
    try:
        for pid in (psutil.Process().pid, child.pid):
            assert abs(process_start_time(pid) - psutil.Process(pid).create_time()) < TOLERANCE_S
    finally:
        child.kill()
        child.wait()


def test_live_owner_is_alive_only_with_its_own_start_time() -> None:
    child = _sleeper()
    try:
        started = process_start_time(child.pid)
        assert owner_alive(child.pid, started)
        assert owner_alive(child.pid, None)
        # The same pid with another start time is a reused pid: not the owner.
        assert not owner_alive(child.pid, started - 5.0)
    finally:
        child.kill()
        child.wait()


def test_a_zombie_or_reaped_owner_is_dead() -> None:
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
