"""The ledger's setup lock (``ledger/flock.py``) excludes other processes, seen from one.

A child process holds the lock (ours, or the ``filelock`` package's, which older agentctl
versions took on the same file); while it does, taking it here waits out its timeout; once
the child has let go — or died — it is taken at once.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from agentctl.ledger.flock import LockBusy, hold_exclusive

HOLDERS = {
    "flock": "from agentctl.ledger.flock import hold_exclusive as h\ncm = h(sys.argv[1], 5)",
    "filelock": "import filelock\ncm = filelock.FileLock(sys.argv[1], thread_local=False)",
}
HOLD = """\
import sys
{holder}
with cm:
    print("held", flush=True)
    sys.stdin.readline()
"""


def _start_holder(kind: str, path: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD.format(holder=HOLDERS[kind]), str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "held"
    return child


@pytest.mark.parametrize("kind", sorted(HOLDERS))
def test_a_held_lock_keeps_others_out_until_released(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "runtime.db.lock"
    child = _start_holder(kind, path)
    try:
        with pytest.raises(LockBusy), hold_exclusive(path, 0.1):
            pass
    finally:
        child.communicate("go\n", timeout=30)
    with hold_exclusive(path, 0.1):
        assert path.exists()
    assert path.exists()  # left in place for the next locker


def test_a_killed_holder_releases_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "runtime.db.lock"
    child = _start_holder("flock", path)
    child.kill()
    child.communicate(timeout=30)
    with hold_exclusive(path, 1.0):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
