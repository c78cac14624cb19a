"""Named crash points for kill-and-recover tests (DESIGN.md §7).

When ``AGENTCTL_CRASH_AT`` names the point reached, the process SIGKILLs itself on the spot —
no cleanup, no atexit, no flush — exactly like a power cut of this one process. With
``AGENTCTL_CRASH_HIT=k`` it dies at the k-th time the point is reached (default: the first),
so a test can kill a run in the middle of an expansion. Unset (production), a point is one
environment lookup.

This module is a leaf that every layer may import (like ``errors``). Points:
- coordinator: ``coordinator.after_requested``, ``coordinator.after_started``,
  ``coordinator.after_result``, ``coordinator.after_outcome``,
  ``coordinator.before_batch_commit``
- worker: ``worker.before_execute``, ``worker.before_result``
- ledger: ``artifact.after_tmp_write``, ``artifact.after_rename``, ``artifact.after_blob_row``,
  ``gc.after_move_to_trash``, ``gc.after_delete_rows``, ``gc.after_commit``
"""

from __future__ import annotations

import os
import signal

CRASH_ENV = "AGENTCTL_CRASH_AT"
HIT_ENV = "AGENTCTL_CRASH_HIT"
_hits: dict[str, int] = {}


def crash_point(name: str) -> None:
    """Die by SIGKILL here if ``AGENTCTL_CRASH_AT`` names this point (at the chosen hit)."""
    if os.environ.get(CRASH_ENV) != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] >= int(os.environ.get(HIT_ENV, "1")):
        os.kill(os.getpid(), signal.SIGKILL)
