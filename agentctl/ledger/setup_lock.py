"""The setup lock ``<db>.lock``: one process at a time creates, converts or migrates a ledger.

Why ``connection.open_database`` needs it is said there (two processes switching one fresh
file to WAL, or building and renaming it, must not interleave). This is the lock itself:
an exclusive ``flock`` on ``<db>.lock`` (mode 0600, kept after use), waited for by polling up
to a timeout, released when its descriptor closes — by the process's end too, so a killed
holder never leaves it taken.

Invariants:
- the lock file is opened without truncation and never removed: removing it while another
  process waits on its descriptor would let a third process lock a new file of that name,
  and two setups would run at once;
- the standard library only (``fcntl``), not filelock: every run that creates a ledger takes
  this lock, and filelock's import (logging, secrets, decimal and its own ~20 modules) cost
  more than the whole setup it guards. The artifact store keeps filelock, imported when used.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from agentctl.errors import LockTimeoutError

SETUP_LOCK_TIMEOUT_S = 60.0
_POLL_S = 0.01


@contextlib.contextmanager
def setup_lock(db: Path, timeout_s: float = SETUP_LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold ``<db>.lock`` exclusively for the block; LockTimeoutError after ``timeout_s``."""
    fd = os.open(f"{db}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        with contextlib.suppress(OSError):  # another user's lock file, a file system without modes
            os.fchmod(fd, 0o600)
        _wait_for_flock(fd, db, timeout_s)
        yield
    finally:
        os.close(fd)  # releases the flock


def _wait_for_flock(fd: int, db: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise LockTimeoutError(
                    f"another agentctl process kept setting up {db} for more than {timeout_s:g} s"
                ) from None
            time.sleep(_POLL_S)
