"""The setup lock ``<db>.lock``: one process at a time creates, converts or migrates a ledger.

Why ``connection.open_database`` needs it is said there (two processes switching one fresh
file to WAL, or building and renaming it, must not interleave). This is the lock itself:
an exclusive ``flock`` on ``<db>.lock`` (mode 0600, kept after use), waited for by polling up
to a timeout, released when its descriptor closes — by the process's end too, so a killed
holder never leaves it taken (``flock.py`` says how, and why it is the standard library's).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from agentctl.ledger.flock import open_lock_file, wait_for_flock

SETUP_LOCK_TIMEOUT_S = 60.0


@contextlib.contextmanager
def setup_lock(db: Path, timeout_s: float = SETUP_LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold ``<db>.lock`` exclusively for the block; LockTimeoutError after ``timeout_s``."""
    fd = open_lock_file(f"{db}.lock")
    try:
        wait_for_flock(
            fd,
            timeout_s,
            lambda: f"another agentctl process kept setting up {db} for more than {timeout_s:g} s",
        )
        yield
    finally:
        os.close(fd)  # releases the flock
