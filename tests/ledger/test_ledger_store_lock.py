"""The artifact store's lock ``artifacts/.lock`` (``ledger/flock.py``, ADR 0016).

Processes exclude each other: a real second interpreter holds the lock and the store waits,
then times out; the threads of one process share a hold, and the ``flock`` goes only when the
last of them leaves.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from ledger_helpers import T0

from agentctl.errors import LockTimeoutError
from agentctl.ledger.artifacts import store as store_module
from agentctl.ledger.artifacts.store import open_artifact_store
from agentctl.ledger.connection import Database
from agentctl.ledger.flock import ProcessLock

# Holds an exclusive flock on argv[1] until its stdin closes.
_HOLD = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""
# Tries once, without waiting, to flock argv[1]; prints "free" or "busy".
_PROBE = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("free")
except BlockingIOError:
    print("busy")
"""


def _holding(lock_file: Path) -> subprocess.Popen[bytes]:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(lock_file)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert holder.stdout is not None
    assert holder.stdout.readline() == b"held\n"
    return holder


def _probe(lock_file: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(lock_file)], capture_output=True, check=True, text=True
    )
    return done.stdout.strip()


def test_an_ingestion_waits_for_another_process_and_times_out(
    ledger: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "LOCK_TIMEOUT_S", 0.2)
    store = open_artifact_store(ledger)
    src = tmp_path / "a.txt"
    src.write_bytes(b"bytes")
    holder = _holding(store.root / ".lock")
    try:
        with pytest.raises(LockTimeoutError, match=r"artifacts/\.lock stayed busy for 0\.2 s"):
            store.ingest(src, T0)
        assert list(store.tmp_dir.iterdir()) == []  # nothing was written while it waited
    finally:
        holder.communicate(b"")
    got = store.ingest(src, T0)
    assert store.blob_path(got.digest).read_bytes() == b"bytes"


def test_threads_share_a_hold_and_the_last_one_out_releases_it(tmp_path: Path) -> None:
    lock_file = tmp_path / ".lock"
    lock = ProcessLock(lock_file, 0.2, lambda: "busy")
    inside, leave = threading.Barrier(2), threading.Event()
    seen: list[str] = []

    def hold_until_told() -> None:
        with lock.held():
            inside.wait(timeout=10)
            leave.wait(timeout=10)

    other = threading.Thread(target=hold_until_told)
    with lock.held():
        other.start()
        inside.wait(timeout=10)  # both threads are inside at once: no deadlock, no timeout
        with lock.held():  # nested in this thread too
            seen.append(_probe(lock_file))
        seen.append(_probe(lock_file))
    seen.append(_probe(lock_file))  # the other thread is still inside
    leave.set()
    other.join(timeout=10)
    seen.append(_probe(lock_file))
    assert seen == ["busy", "busy", "busy", "free"]
    assert lock_file.stat().st_mode & 0o777 == 0o600
