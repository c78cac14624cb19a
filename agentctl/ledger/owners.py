"""A local lease owner's process identity: its pid and its start time.

A run's lease records the owning process as (pid, start time) so that a reused pid is not
taken for the owner. The start time is written by one process and compared by another
(``resume``, ``cancel``, ``serve``; the worker registry's ``kill_stale_workers`` too), so
both read it here, the same way. Where there is a
procfs it is read from ``/proc`` without importing psutil (~5 ms of every run's start): the
start in clock ticks since boot ÷ ticks per second + the boot anchor (``boot_anchor``: the
boot time the first agentctl process of this boot read). The kernel's current boot time
moves when the wall clock is stepped, the anchor does not: readings taken on either side of
a step agree exactly, so a live owner is never taken for a dead one after an NTP step or a
VM resume. Anchors are per user; a process of another user (two users sharing a ledger) is
also read with its user's anchor, the one it wrote its own start time with. Elsewhere
(macOS) the reading is psutil's, which is not step-tolerant.

Compatibility: a lease written by an older agentctl (or where there is no anchor) holds the
old formula's value, the start since boot + the boot time *then*. A check therefore accepts
either reading: the anchored one or the old formula's now (start since boot + current boot
time). Without a step both readings are the same number, so nothing changes for old values.

Reused pids: another process with the same pid started later, so its start since boot
differs by at least a tick (10 ms) from the owner's, and both of its readings differ from the
stored value by that much when the clock has not been stepped. After a step of s seconds,
the old formula's reading is off by s (and two users' anchors may differ by a step): it
could match only if s were, within the tolerance, the gap between the two processes'
starts — a coincidence of 10 ms in the life of a pid.

Known limit (kept): another user's anchor file is that user's to rewrite. A user whose own
process took the pid of a dead coordinator of someone else could write an anchor value that
makes it match the dead owner's start time (it takes a value whose 10 ms fraction fits, and
the pid to be reused); the run then looks owned, so ``resume`` waits and the dead
coordinator's workers are not killed, until that process ends — a denial of progress on a
ledger shared between users, never a second driver: whoever is taken for alive drives
nothing. Not reading other users' anchors would instead take their live coordinators for
dead after a clock step (what anchors exist to prevent); recording the owner's uid with the
lease, to read a process with an anchor only when its uid is the recorded one, needs a
ledger schema version.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from agentctl.ledger.boot_anchor import boot_anchor, read_btime, user_anchor

# Start times are compared with this tolerance: the reading is a float of seconds.
TOLERANCE_S = 0.01
# Linux's procfs: other systems (illumos, a FreeBSD procfs) may have /proc without ``stat``.
_PROCFS = os.path.exists("/proc/self/stat")
# What reading /proc (a file that vanished, a line of another shape) can raise.
_READ_ERRORS = (OSError, ValueError, IndexError, StopIteration)


class _Gone(Exception):
    """The process does not exist (or is a zombie): it owns nothing."""


class _Unreadable(Exception):
    """The process exists but its start time cannot be read."""


@dataclass(frozen=True)
class _ProcStat:
    """What ``/proc/<pid>/stat`` says of a process: its start and its user."""

    since_boot: float  # seconds from boot to the process's start
    uid: int  # its effective user: /proc/<pid>/stat belongs to it


def _procfs_stat(pid: int) -> _ProcStat:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
            uid = os.fstat(fh.fileno()).st_uid
    except FileNotFoundError:
        raise _Gone from None
    fields = stat[stat.rfind(b")") + 2 :].split()
    if fields[0] == b"Z":
        raise _Gone
    return _ProcStat(float(fields[19]) / os.sysconf("SC_CLK_TCK"), uid)  # field 22, starttime


def _procfs_start_times(pid: int) -> Iterator[float]:
    """The readings that count as ``pid``'s start time (``_readings``); a process that is gone
    or a zombie raises here, before any reading."""
    return _readings(_procfs_stat(pid))


def _readings(proc: _ProcStat) -> Iterator[float]:
    """With this user's anchor first, with the process's user's anchor (another user's
    process), then the old formula's (the current boot time), the only one where there is
    no anchor. Lazy: the boot time is read only when the anchored readings do not match."""
    own = boot_anchor()
    if own is not None:
        yield proc.since_boot + own
    if proc.uid != os.geteuid():
        theirs = user_anchor(proc.uid)
        if theirs is not None:
            yield proc.since_boot + theirs
    yield proc.since_boot + read_btime()


def _psutil_start_times(pid: int) -> Iterator[float]:
    import psutil  # no procfs (macOS): psutil reads it its own way

    try:
        return iter((psutil.Process(pid).create_time(),))
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        raise _Gone from None
    except psutil.Error:
        raise _Unreadable from None


def _start_times(pid: int) -> Iterator[float]:
    return _procfs_start_times(pid) if _PROCFS else _psutil_start_times(pid)


def process_start_time(pid: int) -> float:
    """The start time of a live process (this one, when it names itself as an owner)."""
    try:
        return next(_start_times(pid))
    except _Gone:
        raise ProcessLookupError(pid) from None


def owner_alive(pid: int, create_time: float | None) -> bool:
    """Whether the process that wrote (pid, create_time) still runs. A process that exists
    but cannot be read counts as alive: better to wait than to steal a live run."""
    try:
        readings = _start_times(pid)  # a process that is gone raises here
        return create_time is None or _agrees(readings, create_time)
    except _Gone:
        return False
    except (_Unreadable, *_READ_ERRORS):
        return True


def is_process(pid: int, create_time: float) -> bool:
    """Whether (pid, create_time) names a live process, strictly: one that cannot be read is
    not taken for it (what is about to be killed must be known to be it)."""
    try:
        return _agrees(_start_times(pid), create_time)
    except (_Gone, _Unreadable, *_READ_ERRORS):
        return False


def start_time_for_record(pid: int) -> float:
    """``process_start_time``, or 0.0 (which names no process) where the process is gone or
    cannot be read: for a record of processes that ``is_process`` will check later."""
    try:
        return next(_start_times(pid))
    except (_Gone, _Unreadable, *_READ_ERRORS):
        return 0.0


def _agrees(readings: Iterable[float], create_time: float) -> bool:
    return any(abs(r - create_time) < TOLERANCE_S for r in readings)
