"""A local lease owner's process identity: its pid and its start time.

A run's lease records the owning process as (pid, start time) so that a reused pid is not
taken for the owner. The start time is written by one process and compared by another
(``resume``, ``cancel``, ``serve``), so both read it here, the same way: where there is a
procfs, from ``/proc`` (psutil's formula — the start in clock ticks since boot ÷ ticks per
second + the boot time — without importing psutil, ~5 ms of every run's start); elsewhere
through psutil. Two readers with different formulas could disagree by more than the
comparison's tolerance and take a live owner for a dead one.
"""

from __future__ import annotations

import os

# Start times are compared with this tolerance: the reading is a float of seconds.
TOLERANCE_S = 0.01
# Linux's procfs: other systems (illumos, a FreeBSD procfs) may have /proc without ``stat``.
_PROCFS = os.path.exists("/proc/self/stat")


class _Gone(Exception):
    """The process does not exist (or is a zombie): it owns nothing."""


class _Unreadable(Exception):
    """The process exists but its start time cannot be read."""


def _procfs_start_time(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except FileNotFoundError:
        raise _Gone from None
    fields = stat[stat.rfind(b")") + 2 :].split()
    if fields[0] == b"Z":
        raise _Gone
    with open("/proc/stat", "rb") as fh:
        boot = next(line for line in fh if line.startswith(b"btime")).split()[1]
    return float(fields[19]) / os.sysconf("SC_CLK_TCK") + float(boot)  # field 22, starttime


def _psutil_start_time(pid: int) -> float:
    import psutil  # no procfs (macOS): psutil reads it its own way

    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        raise _Gone from None
    except psutil.Error:
        raise _Unreadable from None


def _start_time(pid: int) -> float:
    return _procfs_start_time(pid) if _PROCFS else _psutil_start_time(pid)


def process_start_time(pid: int) -> float:
    """The start time of a live process (this one, when it names itself as an owner)."""
    try:
        return _start_time(pid)
    except _Gone:
        raise ProcessLookupError(pid) from None


def owner_alive(pid: int, create_time: float | None) -> bool:
    """Whether the process that wrote (pid, create_time) still runs. A process that exists
    but cannot be read counts as alive: better to wait than to steal a live run."""
    try:
        actual = _start_time(pid)
    except _Gone:
        return False
    except (_Unreadable, OSError, ValueError, IndexError, StopIteration):
        return True
    return create_time is None or abs(actual - create_time) < TOLERANCE_S
