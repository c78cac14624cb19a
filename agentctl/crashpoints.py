"""Named crash points for kill-and-recover tests (DESIGN.md §7), as one enum.

When ``AGENTCTL_CRASH_AT`` names the point reached, the process SIGKILLs itself on the spot —
no cleanup, no atexit, no flush — exactly like a power cut of this one process. With
``AGENTCTL_CRASH_HIT=k`` it dies at the k-th time the point is reached (default: the first),
so a test can kill a run in the middle of an expansion. Both are read once, when this module
is first imported: a process is armed (or not) for its whole life, as the tests that use them
set them in the environment of the process they start. Unset (production), a point is one
identity comparison — points are on every effect's path, in the coordinator and the worker.

Invariants:
- every point marks its own window of durable state; no two points are reached with the same
  state on disk (tests/crash/test_crash_matrix.py checks this for the coordinator and worker
  points, tests/ledger/test_ledger_artifact_crash.py for the artifact and GC points);
- this module is a leaf that every layer may import (like ``errors``).
"""

from __future__ import annotations

import os
import signal
from enum import StrEnum

CRASH_ENV = "AGENTCTL_CRASH_AT"
HIT_ENV = "AGENTCTL_CRASH_HIT"


class CrashPoint(StrEnum):
    # coordinator: the effect protocol's windows, in the order one effect passes them
    AFTER_REQUESTED = "coordinator.after_requested"  # request durable, held for an approval
    AFTER_STARTED = "coordinator.after_started"  # `started` durable, nothing dispatched yet
    AFTER_RESULT = "coordinator.after_result"  # the result is in memory, its outcome is not durable
    AFTER_OUTCOME = "coordinator.after_outcome"  # the outcome is durable
    # worker: inside the process that executes the effect
    WORKER_BEFORE_EXECUTE = "worker.before_execute"  # Execute received, nothing run
    WORKER_BEFORE_RESULT = "worker.before_result"  # the effect ran, its reply is not sent
    # stream: a streamed model answer's fragment is durable, the worker not yet told so
    STREAM_AFTER_EVENT = "stream.after_event"
    # ledger: the artifact store's ingestion and collection steps
    ARTIFACT_AFTER_TMP_WRITE = "artifact.after_tmp_write"
    ARTIFACT_AFTER_RENAME = "artifact.after_rename"
    ARTIFACT_AFTER_BLOB_ROW = "artifact.after_blob_row"
    GC_AFTER_MOVE_TO_TRASH = "gc.after_move_to_trash"
    GC_AFTER_DELETE_ROWS = "gc.after_delete_rows"
    GC_AFTER_COMMIT = "gc.after_commit"
    # ledger: a new ledger built aside (connection.py), complete and flushed
    LEDGER_NEW_BEFORE_RENAME = "ledger.new_before_rename"  # not yet at its path
    LEDGER_NEW_AFTER_RENAME = "ledger.new_after_rename"  # at its path, directory not flushed


def _armed() -> CrashPoint | None:
    """The point ``AGENTCTL_CRASH_AT`` names; None when unset or naming no point."""
    try:
        return CrashPoint(os.environ.get(CRASH_ENV, ""))
    except ValueError:
        return None


_ARMED = _armed()
_hits: dict[CrashPoint, int] = {}


def crash_point(point: CrashPoint) -> None:
    """Die by SIGKILL here if ``AGENTCTL_CRASH_AT`` names this point (at the chosen hit)."""
    if point is not _ARMED:
        return
    _hits[point] = _hits.get(point, 0) + 1
    if _hits[point] >= int(os.environ.get(HIT_ENV, "1")):
        os.kill(os.getpid(), signal.SIGKILL)
