"""Starting worker processes before a run exists, with nothing heavier than the stdlib.

A worker's start-up (its interpreter, trio, the wire models, the executors it preloads) is
the longest step before a run's first worker effect can leave. ``early_workers`` starts one
worker as soon as ``agentctl run`` has its file's text — before the coordinator's own
imports, the compile and the database open — when that text names a worker-placed operation
kind; ``workerproc.prestart_workers`` then tops the workers up to what the compiled plan
needs (or kills them all if it needs none) and the pool adopts them (``Prestarted.take``).
Those top-ups are forked from the coordinator when ``workerfork.can_fork`` allows (ADR 0017:
it has trio and the wire models already), the early one never (nothing to share yet).
This module imports only the stdlib at load (the registry when guessing, trio when a pool
waits for an adopted worker), so starting the worker is the first thing a run does.

Invariants:
- a worker never imports from the directory it starts in (``-P``, or its entry dropped from a
  forked worker's ``sys.path``), only from the install;
- a worker gets exactly one inherited fd (its socketpair end) besides the standard three, and
  its own session, however it was started; the coordinator keeps the other end, so a worker
  whose coordinator died reads EOF and exits;
- a started worker is either adopted by a pool (which then owns its whole life) or killed
  and reaped when its ``Prestarted`` closes — never left running;
- the guess from the text is an optimisation only: a kind named in a comment starts a worker
  the plan may not need (it is killed once the plan is known), a kind the text does not name
  (a run-time registration, a model call) leaves the start to ``prestart_workers`` as before;
- ``--preload`` is an optimisation too: a module that fails to import is reported by the
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
from pathlib import Path
from typing import Protocol


def worker_argv(fd: int, preload: Sequence[str]) -> list[str]:
    # -P: `-m` would put the current directory first on the worker's sys.path, so a
    # `signal.py` or `mcp.py` in the directory a run starts from would be imported — code run
    # by agentctl itself, before any policy. PYTHONPATH and the environment still apply.
    argv = [sys.executable, "-P", "-m", "agentctl.workers", "--fd", str(fd)]
    for module in preload:
        argv += ["--preload", module]
    return argv


class AdoptedProcess:
    """A worker started before trio ran (exec'd or forked), as the pool's ``ChildProcess``."""

    def __init__(self, popen: StartedProcess) -> None:
        self._popen = popen

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    async def wait(self) -> int:
        import trio  # loaded long before a pool waits: not on the early start's path

        # A thread per wait: the pool waits for a worker only while stopping or reaping it.
        return await trio.to_thread.run_sync(self._popen.wait, abandon_on_cancel=True)


class StartedProcess(Protocol):
    """What a prestarted worker is to its owner: ``subprocess.Popen`` or ``ForkedProcess``."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def wait(self) -> int: ...


def _forked(
    parent: socket.socket, child: socket.socket, preload: Sequence[str]
) -> StartedProcess | None:
    """A worker forked from this process, when that is safe and saves its imports
    (``workerfork``, ADR 0017); ``None`` otherwise."""
    from agentctl.coordinator import workerfork

    return workerfork.fork_worker(parent, child, preload) if workerfork.can_fork() else None


def _execed(child: socket.socket, preload: Sequence[str]) -> StartedProcess | None:
    fd = child.fileno()
    try:
        return subprocess.Popen(
            worker_argv(fd, preload),
            pass_fds=(fd,),
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return None


class Prestarted:
    """Workers started ahead of a run; the pool takes them one at a time."""

    def __init__(self, preload: Sequence[str]) -> None:
        self.preload = tuple(preload)
        self.started = 0  # workers started and not killed (taken or waiting)
        self._waiting: list[tuple[StartedProcess, socket.socket]] = []

    def start(self, *, may_fork: bool = False) -> None:
        """Start one more worker: forked when ``may_fork`` and ``workerfork.can_fork``,
        exec'd otherwise."""
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            forked = _forked(parent, child, self.preload) if may_fork else None
            proc = forked or _execed(child, self.preload)
        finally:
            child.close()
        if proc is None:
            parent.close()
            return  # the pool will start one itself, and report why if it cannot
        self._waiting.append((proc, parent))
        self.started += 1

    def pids(self) -> list[int]:
        """The workers started and not yet taken."""
        return [popen.pid for popen, _ in self._waiting]

    def take(self) -> tuple[AdoptedProcess, socket.socket] | None:
        if not self._waiting:
            return None
        popen, parent = self._waiting.pop(0)
        return AdoptedProcess(popen), parent

    def close(self) -> None:
        """Kill and reap the workers no pool took.

        A worker never adopted has run no effect, so it has no children: killing its process
        group (it leads its own session) kills all it is.
        """
        waiting, self._waiting = self._waiting, []
        self.started -= len(waiting)  # what a pool may still expect to adopt: none
        for popen, parent in waiting:
            parent.close()
            with contextlib.suppress(OSError):
                os.killpg(popen.pid, signal.SIGKILL)
            popen.wait()


def worker_modules_named(text: str) -> tuple[str, ...]:
    """The executor modules of the worker-placed operation kinds ``text`` mentions, sorted."""
    from agentctl.core import registry

    modules = {
        op.executor.partition(":")[0]
        for op in registry.entries()
        if op.placement == "worker" and op.executor is not None and op.name in text
    }
    return tuple(sorted(modules))


@contextlib.contextmanager
def early_workers(path: Path, *, preview: bool) -> Iterator[Prestarted]:
    """One worker started now if the workflow file at ``path`` names a worker-placed kind
    (none for a preview, a file that cannot be read — the compile reports that — or one that
    is not a regular file); those still unadopted are killed on exit."""
    modules: tuple[str, ...] = ()
    with contextlib.suppress(OSError, UnicodeDecodeError):
        # A regular file only: reading a pipe here would take the compile's input from it.
        if not preview and path.is_file():
            modules = worker_modules_named(path.read_text(encoding="utf-8"))
    early = Prestarted(modules)
    try:
        if modules:
            early.start()
        yield early
    finally:
        early.close()
