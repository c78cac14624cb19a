"""An exclusive, inter-process lock on a file, held for a ``with`` block.

Used by the ledger's first-time setup (``<db>.lock``, ``connection._setup_lock``). It is the
same lock the ``filelock`` package takes on POSIX — ``flock(LOCK_EX)`` on a file kept in
place — so processes of either kind exclude each other; written out here because importing
``filelock`` (its settings, state and logging set-up) cost a one-task ``run`` more than the
whole setup it guards.

Invariants:
- the lock file is created with mode 0600, never follows a symlink, and is left in place
  (removing it would let a waiter lock an unlinked inode while a newcomer locks a new file);
- the kernel drops the lock when the process dies, so a crashed holder never blocks anyone;
- waiting polls a non-blocking ``flock``, never longer than ``timeout_s``; then
  ``LockBusy``. Not reentrant: one ``with`` per lock at a time in a process.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

POLL_S = 0.02


class LockBusy(Exception):
    """The lock stayed held by another process for the whole timeout."""


@contextlib.contextmanager
def hold_exclusive(path: Path | str, timeout_s: float) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created 0600 if missing) for the block."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    try:
        _acquire(fd, time.monotonic() + timeout_s)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _acquire(fd: int, deadline: float) -> None:
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() >= deadline:
            raise LockBusy
        time.sleep(POLL_S)
