"""Exclusive ``flock`` locks on files that are kept after use: waiting for one, and holding one
for a whole process.

Two locks are built on this: the setup lock ``<db>.lock`` (``setup_lock.py``) and the artifact
store's ``artifacts/.lock`` (``artifacts/store.py``).

Invariants:
- a lock file is opened without truncation and never removed:
  removing it while another process waits on its descriptor would let a third process lock a
  new file of that name, and two holders would run at once;
- the lock is released when its descriptor closes, by the process's end too, so a killed
  holder never leaves it taken;
- ``ProcessLock`` is held by a process, not by a thread: the first of its threads to enter
  takes the ``flock``, the others join that hold, and the last one out releases it. It
  excludes other processes (and other ``ProcessLock`` objects on the same file, whose
  descriptors are their own); it does not order this process's threads against each other;
- the standard library only (``fcntl``): the filelock package's import (logging, secrets,
  decimal and ~20 modules of its own) cost more than the setup the first lock guards, and each
  take of its lock ~0.5 ms of coordinator CPU in a ``builtin.write`` step (ADR 0016).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator

from agentctl.errors import LockTimeoutError

_POLL_S = 0.01
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC


def open_lock_file(path: str | os.PathLike[str], *, follow_symlinks: bool = True) -> int:
    """A descriptor on the lock file ``path`` (created 0600; an existing one is made 0600)."""
    flags = _OPEN_FLAGS if follow_symlinks else _OPEN_FLAGS | os.O_NOFOLLOW
    fd = os.open(path, flags, 0o600)
    # Only when needed: a chmod dirties the inode even to the same mode, and the journal
    # commit of the next fsync (a blob's, the WAL's) would carry it.
    with contextlib.suppress(OSError):  # another user's lock file, a file system without modes
        if stat.S_IMODE(os.fstat(fd).st_mode) != 0o600:
            os.fchmod(fd, 0o600)
    return fd


def wait_for_flock(fd: int, timeout_s: float, busy: Callable[[], str]) -> None:
    """Take an exclusive ``flock`` on ``fd``, polling; ``LockTimeoutError(busy())`` after
    ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise LockTimeoutError(busy()) from None
            time.sleep(_POLL_S)


class ProcessLock:
    """An exclusive ``flock`` on ``path`` (never opened through a symlink) that this process
    holds while any thread is inside ``held()``; nested and concurrent entries share the one
    hold."""

    def __init__(
        self, path: str | os.PathLike[str], timeout_s: float, busy: Callable[[], str]
    ) -> None:
        self.path = path
        self._timeout_s = timeout_s
        self._busy = busy
        self._guard = threading.Lock()  # the count and the descriptor, not the work
        self._holders = 0
        self._fd = -1

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        self._enter()
        try:
            yield
        finally:
            self._leave()

    def _enter(self) -> None:
        with self._guard:
            if self._holders == 0:
                fd = open_lock_file(self.path, follow_symlinks=False)
                try:
                    wait_for_flock(fd, self._timeout_s, self._busy)
                except BaseException:
                    os.close(fd)
                    raise
                self._fd = fd
            self._holders += 1

    def _leave(self) -> None:
        with self._guard:
            self._holders -= 1
            if self._holders == 0:
                fd, self._fd = self._fd, -1
                os.close(fd)  # releases the flock
