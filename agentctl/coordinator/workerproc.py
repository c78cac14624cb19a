"""Worker processes as the pool sees them: how one is started, how its tree is signalled, and
workers started before the run needs them.

``prestart_workers`` launches worker processes while nothing async runs yet — before
``agentctl run`` opens its database and creates the run — so the workers' start-up (the
interpreter, then importing the executors the plan names: ``--preload``) overlaps that
work instead of following it. The pool adopts them (``Prestarted.take``) in place of
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
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from typing import Protocol

import psutil
import trio

from agentctl.core.plan import Plan
from agentctl.core.workload import workload


class ChildProcess(Protocol):
    """What the pool needs of a worker process (``trio.Process`` is one)."""

    @property
    def pid(self) -> int: ...

    async def wait(self) -> int: ...


def worker_argv(fd: int, preload: Sequence[str]) -> list[str]:
    argv = [sys.executable, "-m", "agentctl.workers", "--fd", str(fd)]
    for module in preload:
        argv += ["--preload", module]
    return argv


def pool_size(plan: Plan) -> int:
    """The most workers ``plan``'s run uses (``core.workload``: I/O-bound effects share)."""
    return workload(plan).pool_size(plan.max_concurrency, os.cpu_count() or 1)


def _session_members(sid: int) -> list[psutil.Process]:
    members = []
    for proc in psutil.process_iter():
        with contextlib.suppress(OSError, psutil.Error):
            if os.getsid(proc.pid) == sid:
                members.append(proc)
    return members


def signal_tree(pid: int, sig: signal.Signals, *, session: bool = False) -> None:
    """Signal ``pid`` and all its descendants; with ``session``, every process of the session
    ``pid`` leads too — a worker's effect children stay in its session even once orphaned."""
    procs: list[psutil.Process] = []
    with contextlib.suppress(psutil.Error):
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    if session:
        procs += _session_members(pid)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(sig)


class AdoptedProcess:
    """A worker started with ``subprocess`` before trio ran, as a ``ChildProcess``."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen

    @property
    def pid(self) -> int:
        return self._popen.pid

    async def wait(self) -> int:
        # A thread per wait: the pool waits for a worker only while stopping or reaping it.
        return await trio.to_thread.run_sync(self._popen.wait, abandon_on_cancel=True)


class Prestarted:
    """Workers started ahead of a run; the pool takes them one at a time."""

    def __init__(self, preload: Sequence[str]) -> None:
        self.preload = tuple(preload)
        self.started = 0
        self._waiting: list[tuple[subprocess.Popen[bytes], socket.socket]] = []

    def start(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        fd = child.fileno()
        try:
            popen = subprocess.Popen(
                worker_argv(fd, self.preload),
                pass_fds=(fd,),
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            parent.close()
            return  # the pool will start one itself, and report why if it cannot
        finally:
            child.close()
        self._waiting.append((popen, parent))
        self.started += 1

    def pids(self) -> list[int]:
        """The workers started and not yet taken."""
        return [popen.pid for popen, _ in self._waiting]

    def take(self) -> tuple[ChildProcess, socket.socket] | None:
        if not self._waiting:
            return None
        popen, parent = self._waiting.pop(0)
        return AdoptedProcess(popen), parent

    def close(self) -> None:
        """Kill and reap the workers no pool took."""
        waiting, self._waiting = self._waiting, []
        for popen, parent in waiting:
            parent.close()
            signal_tree(popen.pid, signal.SIGKILL, session=True)
            popen.wait()


@contextlib.contextmanager
def prestart_workers(plan: Plan, *, preview: bool) -> Iterator[Prestarted]:
    """Start the workers ``plan``'s first effects will use (none for a preview or a plan
    without worker-placed effects); those still unadopted are killed on exit."""
    needs = workload(plan)
    prestarted = Prestarted(needs.modules())
    count = 0 if preview else min(needs.worker_tasks, pool_size(plan))
    try:
        for _ in range(count):
            prestarted.start()
        yield prestarted
    finally:
        prestarted.close()
