"""Worker processes as the pool sees them: how one is started, how its tree is signalled, and
workers started before the run needs them.

``prestart_workers`` launches worker processes while nothing async runs yet — before
``agentctl run`` opens its database and creates the run — so the workers' start-up (the
interpreter, then importing the executors the plan names: ``--preload``) overlaps that
work instead of following it; it tops up the worker ``workerstart.early_workers`` may have
started before the compile. The pool adopts them (``Prestarted.take``) in place of
starting new ones.

Invariants:
- a worker gets exactly one inherited fd (its socketpair end) and its own session, however it
  was started; the coordinator keeps the other end, so a worker whose coordinator died reads
  EOF and exits;
- a prestarted worker is either adopted by a pool (which then owns its whole life) or
  SIGKILLed and reaped when the ``prestart_workers`` block ends — never left running;
- ``--preload`` is an optimisation only: a module that fails to import is reported by the
  effect that needs it, as without preloading.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import socket
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import trio

from agentctl.coordinator.workerstart import Prestarted, worker_argv
from agentctl.core.jsonvalue import JsonValue, as_list, as_object
from agentctl.core.plan import Plan
from agentctl.core.workload import Workload, workload
from agentctl.errors import AgentctlError, from_os_error
from agentctl.ledger.owners import (
    TOLERANCE_S,
    is_process,
    process_start_time,
    start_time_for_record,
)

# psutil (~5 ms to import) is imported by the functions that signal or find processes: a
# run with no workers and no stale registry to clean never calls them.
if TYPE_CHECKING:
    import psutil


class ChildProcess(Protocol):
    """What the pool needs of a worker process (``trio.Process`` is one)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...  # set once ``wait`` has reaped it

    async def wait(self) -> int: ...


async def wait_all(procs: Sequence[ChildProcess], grace: float | None) -> None:
    """Wait for each of ``procs`` to exit, for at most ``grace`` seconds in all (None: no
    limit)."""
    with trio.move_on_after(grace if grace is not None else math.inf):
        for proc in procs:
            await proc.wait()


async def launch_worker(
    preload: Sequence[str], env: Mapping[str, str] | None
) -> tuple[ChildProcess, socket.socket]:
    """Start a worker (``env``: its whole environment, None: ours) on a new socketpair; the
    process and the coordinator's end of the pair."""
    parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    fd = child_sock.fileno()
    try:
        proc = await trio.lowlevel.open_process(
            worker_argv(fd, preload),
            pass_fds=(fd,),
            stdin=subprocess.DEVNULL,
            # Its own session: the terminal's SIGINT goes to the coordinator only, and
            # the session id finds the worker's orphaned children if the worker dies.
            start_new_session=True,
            env=env,
        )
    except OSError as exc:
        parent_sock.close()
        raise AgentctlError(f"cannot start a worker process: {exc}") from exc
    finally:
        child_sock.close()
    return proc, parent_sock


def pool_size(plan: Plan, needs: Workload | None = None) -> int:
    """The most workers ``plan``'s run uses (``core.workload``: I/O-bound effects share);
    ``needs``: its workload, when the caller has it (it walks every task)."""
    needs = workload(plan) if needs is None else needs
    return needs.pool_size(plan.max_concurrency, os.cpu_count() or 1)


def _signal_session(sid: int, sig: signal.Signals) -> None:
    """Signal every process of session ``sid`` (read from ``/proc``: a pool's close scans
    once a worker, and building a ``psutil.Process`` for every process on the machine took
    ~10 ms). A member is signalled through a pidfd, its session checked again once the pidfd
    is open, so a pid that ended and was reused in between is never hit; the session id
    itself cannot be reused while a process of the session lives."""
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != sid:
            with contextlib.suppress(OSError):  # gone meanwhile, or not ours to signal
                _signal_member(int(name), sid, sig)


def _signal_member(pid: int, sid: int, sig: signal.Signals) -> None:
    if os.getsid(pid) != sid:  # most processes: one system call, no descriptor
        return
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except OSError:  # no pidfds (a kernel before 5.3): signalled by number, as just checked
        os.kill(pid, sig)
        return
    try:
        if os.getsid(pid) == sid:
            signal.pidfd_send_signal(fd, sig)
    finally:
        os.close(fd)


def signal_tree(
    pid: int, sig: signal.Signals, *, session: bool = False, reaped: bool = False
) -> None:
    """Signal ``pid`` and all its descendants; with ``session``, every process of the session
    ``pid`` leads too — a worker's effect children stay in its session even once orphaned.
    ``reaped``: ``pid`` has been waited for, so the number may name another process now —
    only its session's remaining members are signalled (the caller passes ``session``)."""
    if not reaped:
        import psutil  # see the top

        with contextlib.suppress(psutil.Error):
            root = psutil.Process(pid)
            for proc in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    proc.send_signal(sig)
    if session:
        _signal_session(pid, sig)


def signal_worker(proc: ChildProcess, sig: signal.Signals) -> None:
    """``signal_tree`` of a worker and its whole session, its own pid left alone once reaped."""
    signal_tree(proc.pid, sig, session=True, reaped=proc.returncode is not None)


@contextlib.contextmanager
def prestart_workers(
    plan: Plan, *, preview: bool, early: Prestarted | None = None
) -> Iterator[Prestarted]:
    """Start the workers ``plan``'s first effects will use (none for a preview or a plan
    without worker-placed effects), beyond those ``early`` started before the plan was known
    (``workerstart.early_workers``: they are killed here if the plan needs none); those still
    unadopted are killed on exit."""
    needs = workload(plan)
    prestarted = Prestarted(needs.modules()) if early is None else early
    count = 0 if preview else min(needs.worker_tasks, pool_size(plan, needs))
    if count == 0:
        prestarted.close()
    # Each later worker preloads what the plan names (an early one guessed from the text).
    prestarted.preload = needs.modules()
    try:
        for _ in range(count - prestarted.started):
            prestarted.start(may_fork=True)  # the coordinator's imports are done: ADR 0017
        yield prestarted
    finally:
        prestarted.close()


def _matches(pid: int, create_time: float) -> psutil.Process | None:
    import psutil  # see the top

    # The handle first, then the identity check: the handle (which ``wait_procs`` uses) is
    # then known to be the recorded process; ``signal_tree`` still looks the pid up again, a
    # window of microseconds that was there before.
    try:
        proc = psutil.Process(pid)
    except (psutil.Error, ValueError):  # ValueError: a negative pid (the records' default)
        return None
    # Read as a lease owner is: a wall-clock step since the registry was written must not
    # make a live coordinator look dead, nor hide a dead one's workers.
    return proc if is_process(pid, create_time) else None


def _recorded(entry: JsonValue) -> psutil.Process | None:
    """The live process a registry record (``pid``, ``createTime``) names, if any; a record
    that is not an object, or whose fields are not numbers or text, names none."""
    record = as_object(entry)
    pid, created = record.get("pid", -1), record.get("createTime", 0.0)
    if not isinstance(pid, int | float | str) or not isinstance(created, int | float | str):
        return None
    return _matches(int(pid), float(created))


def _kill_orphaned_session(entry: JsonValue) -> list[psutil.Process]:
    """SIGKILL what is left of the session of a recorded worker that is itself gone (killed
    with its coordinator, say): an effect's process it started lives on in that session and
    would finish the effect after an operator judged it. Returns those processes.

    Only while no process has the worker's pid: a number still used as a live session's id is
    never handed out again, so the pid being free and the members' session being that number
    means they are the worker's (a member is also born after the worker, checked as well)."""
    import psutil  # see the top

    record = as_object(entry)
    pid, created = record.get("pid"), record.get("createTime")
    if not isinstance(pid, int) or not isinstance(created, int | float) or pid <= 1:
        return []
    if psutil.pid_exists(pid):
        return []  # another process has the number: the worker's session has no one left
    members = []
    for name in os.listdir("/proc"):
        with contextlib.suppress(OSError, psutil.Error):
            # Start times compared on the registry's own clock (``process_start_time``'s).
            if (
                name.isdigit()
                and os.getsid(int(name)) == pid
                and start_time_for_record(int(name)) >= float(created) - TOLERANCE_S
            ):
                members.append(psutil.Process(int(name)))
    for member in members:
        with contextlib.suppress(psutil.Error):
            member.kill()  # psutil checks the pid still names this very process
    return members


def kill_stale_workers(registry_path: str) -> list[int]:
    """Kill the workers recorded in ``registry_path`` if their coordinator is dead.

    Only a process whose pid AND create time match a record is touched. Returns the pids
    killed; the registry file is removed afterwards. A registry still owned by another live
    coordinator is left alone.
    """
    import psutil  # see the top

    try:
        with open(registry_path, encoding="utf-8") as fh:
            loaded: JsonValue = json.load(fh)
    except FileNotFoundError:
        return []
    except (OSError, ValueError):
        loaded = {}
    data = as_object(loaded)  # a registry that is no object records nothing, as unreadable
    owner_proc = _recorded(data.get("coordinator"))
    if owner_proc is not None and owner_proc.pid != os.getpid():
        return []
    killed: list[psutil.Process] = []
    for entry in as_list(data.get("workers")):
        proc = _recorded(entry)
        if proc is not None:
            signal_tree(proc.pid, signal.SIGKILL, session=True)
            killed.append(proc)
        else:
            killed.extend(_kill_orphaned_session(entry))
    psutil.wait_procs(killed, timeout=5)
    with contextlib.suppress(FileNotFoundError):
        os.remove(registry_path)
    return [p.pid for p in killed]


def reap_stale_workers(location: Path) -> None:
    """Kill the workers that dead coordinators of the ledger at ``location`` left
    (``kill_stale_workers`` of each registry in ``LOCATION.workers``), creating nothing.

    Before a drive, and before a verdict on what a crash left (a resume that stops at an
    unresolved effect, an operator's reconciliation): a worker its dead coordinator could
    not take down with it (stopped, hung) may still be executing the very effect judged, and
    would finish it after an operator said it never ran."""
    folder = Path(f"{location}.workers")
    if folder.is_dir():
        for stale in sorted(folder.glob("*.json")):
            kill_stale_workers(str(stale))


def write_worker_registry(registry_path: str, workers: list[tuple[int, float]]) -> None:
    """Record this coordinator and its live ``(pid, create time)`` workers for
    ``kill_stale_workers``: written aside, then renamed into place."""
    me = os.getpid()
    data = {
        "version": 1,
        "coordinator": {"pid": me, "createTime": process_start_time(me)},
        "workers": [{"pid": pid, "createTime": created} for pid, created in workers],
    }
    tmp = f"{registry_path}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, registry_path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # no stray .tmp per attempt
        raise from_os_error(exc, f"worker registry {registry_path}") from exc
