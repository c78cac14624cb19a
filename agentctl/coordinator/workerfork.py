"""Starting a worker by forking the coordinator, when the coordinator has already imported
what a worker needs and nothing else runs in it (ADR 0017).

A worker started by ``exec`` spends ~100 ms importing trio and the wire models before its
``Hello``, and a run's first worker effect waits for it. A process that drives runs from
Python (``api.start_run``, its workers topped up by ``prestart_workers``) has those modules
in memory already, so a forked child is ready at once. The child does what ``Popen`` does
for an exec'd worker — its own session, stdin from ``/dev/null``, no descriptor but the
standard three and its socket — then resets what a fresh interpreter would not have (Python
signal handlers, the wake-up fd, logging handlers, redirected ``sys`` streams, the start-up
directory first on ``sys.path``) and enters the worker by module name, as ``python -m
agentctl.workers`` does: this package never imports worker code, the child runs it.

Invariants:
- a fork happens only on Linux, from a process in which trio is imported, no trio run is
  active and no thread runs but trio's idle cached ones (``/proc/self/task``); otherwise
  the caller starts the worker by ``exec`` — a fork is an optimisation, never a requirement;
- the child never returns into the caller's frames: whatever happens it leaves by
  ``os._exit``, so no ``finally``, ``atexit`` handler or buffered stream of the parent runs
  twice;
- the child holds the parent's end of no socketpair: the coordinator's end closes in the
  child before anything else, so a worker whose coordinator died reads EOF, as an exec'd one.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

WORKER_MODULE = "agentctl.workers"  # the module ``python -m`` runs; its ``__main__`` enters
_NEEDED = ("trio",)  # without it a fork saves little: trio is most of a worker's imports
_INHERITED: list[object] = []  # in a forked child: the parent's ``sys`` streams (see below)


class ForkedProcess:
    """A forked worker as ``Prestarted`` and the pool see a started one (``pid``,
    ``returncode``, a blocking ``wait``), reaped once."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._lock = threading.Lock()  # one reaper: a second ``waitpid`` would find no child

    def wait(self) -> int:
        with self._lock:
            if self.returncode is None:
                _, status = os.waitpid(self.pid, 0)
                self.returncode = os.waitstatus_to_exitcode(status)
            return self.returncode


def can_fork() -> bool:
    """Whether a fork would start a worker both safely and faster than ``exec``."""
    if not hasattr(os, "fork") or any(name not in sys.modules for name in _NEEDED):
        return False
    return _quiet_threads() and not _in_trio_run()


def _quiet_threads() -> bool:
    """No thread but this one could hold a lock the child would need: every other thread is
    one of trio's cached worker threads, idle (parked on its own lock, which trio forgets in a
    forked child: ``_thread_cache``'s at-fork hook) — a previous run's ``to_thread`` calls
    leave some for ~10 s — and no thread exists that Python does not know of."""
    try:
        threads = len(os.listdir("/proc/self/task"))  # every thread, not only Python's
        from trio._core._thread_cache import THREAD_CACHE  # no public view of the idle ones

        idle = {worker._thread.ident for worker in list(THREAD_CACHE._idle_workers)}
    except (OSError, ImportError, AttributeError):
        return False
    current = threading.get_ident()
    others = {t.ident for t in threading.enumerate()} - {current}
    return threads == len(others) + 1 and others <= idle


def _in_trio_run() -> bool:
    import trio  # imported already (``_NEEDED``)

    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        return False
    return True


def fork_worker(
    parent: socket.socket, child: socket.socket, preload: Sequence[str]
) -> ForkedProcess | None:
    """Fork a worker serving ``child`` (its end, which the caller still closes in the
    parent); ``None`` when the fork itself failed (the caller execs instead).

    The wire models' validators are installed here first (importing the models): the pool
    needs them in this process anyway before its first frame, and the child then has them."""
    from agentctl.mailbox import wirecache

    wirecache.prepare_wire_models()
    try:
        pid = os.fork()
    except OSError:
        return None
    if pid == 0:
        _run_child(parent, child, tuple(preload))
    return ForkedProcess(pid)


def _run_child(parent: socket.socket, child: socket.socket, preload: tuple[str, ...]) -> NoReturn:
    code = 1
    try:
        parent.close()
        fd = child.detach()  # the worker owns it now, by number
        _become_a_fresh_process(fd)
        entry = importlib.import_module(f"{WORKER_MODULE}.__main__")
        code = entry.run_forked(fd, preload)
    except BaseException as exc:  # one line, as an exec'd worker reports it
        with contextlib.suppress(Exception):
            os.write(2, f"agentctl worker {os.getpid()}: {type(exc).__name__}: {exc}\n".encode())
    finally:
        os._exit(code)


def _become_a_fresh_process(fd: int) -> None:
    """What ``Popen(pass_fds=(fd,), stdin=DEVNULL, start_new_session=True)`` and a fresh
    interpreter give an exec'd worker, and a forked child inherits otherwise."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.closerange(3, fd)  # the parent's files, databases and locks are not the worker's
    os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX"))
    _reset_signals()
    _forget_log_handlers()
    # The parent's stream objects are kept, never finalized: one whose last reference went
    # would flush its buffer — the parent's output — into a descriptor just closed or reused.
    _INHERITED.extend((sys.stdin, sys.stdout, sys.stderr))
    sys.stdin, sys.stdout, sys.stderr = (
        open(n, mode, encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
        for n, mode in ((0, "r"), (1, "w"), (2, "w"))
    )
    import faulthandler

    if faulthandler.is_enabled():  # its file may have been one of the descriptors closed
        faulthandler.enable(file=sys.stderr)
    _drop_start_path()


def _drop_start_path() -> None:
    """What ``-P`` keeps out of an exec'd worker: the entry Python put first on ``sys.path``
    at start-up — the current directory (``-c``, ``-m``) or the main script's — and only it
    (a ``PYTHONPATH`` entry naming the same directory stays, as it would there)."""
    if sys.flags.safe_path or not sys.path:
        return
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    starts = {os.path.dirname(os.path.abspath(main))} if main else set()
    with contextlib.suppress(OSError):  # a directory since removed is nobody's start
        starts.add(os.getcwd())
    if os.path.abspath(sys.path[0] or ".") in starts:
        del sys.path[0]


def _forget_log_handlers() -> None:
    """A fresh interpreter's logging: no handler anywhere. The parent's handlers write to
    files whose descriptors were just closed — and whose numbers the worker's own sockets may
    take next, so a log record (httpx logs each request) could land in a connection."""
    logging = sys.modules.get("logging")
    if logging is None:
        return
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    for logger in loggers:
        if isinstance(logger, logging.Logger):
            logger.handlers.clear()


def _reset_signals() -> None:
    """Python handlers the parent installed (a CLI's, an application's) back to a fresh
    interpreter's; ignored signals stay ignored, as they would across ``exec``."""
    signal.set_wakeup_fd(-1)
    for sig in signal.valid_signals():
        with contextlib.suppress(OSError, ValueError, TypeError):
            if callable(signal.getsignal(sig)):
                fresh = signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL
                signal.signal(sig, fresh)
