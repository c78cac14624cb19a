"""Named crash points for kill-and-recover tests.

When the environment variable ``AGENTCTL_CRASH_AT`` equals a point's name, the process
SIGKILLs itself there — no cleanup, no atexit, no flush — exactly like a power cut as far as
the ledger and the artifact store can tell. Unset (production), a point is one dict lookup.

Points in the ledger package:
- ``artifact.after_tmp_write``   ingest: bytes hashed into ``tmp/`` and fsynced, not yet renamed
- ``artifact.after_rename``      ingest: blob visible under ``sha256/``, no blob row yet
- ``artifact.after_blob_row``    ingest: blob row and ingestion lease committed
- ``gc.after_move_to_trash``     gc: candidate blobs moved to ``trash/``, rows not yet deleted
- ``gc.after_delete_rows``       gc: rows deleted inside the open transaction, not committed
- ``gc.after_commit``            gc: deletion committed, ``trash/`` not yet emptied
"""

from __future__ import annotations

import os
import signal

CRASH_ENV = "AGENTCTL_CRASH_AT"


def crash_point(name: str) -> None:
    """Die by SIGKILL here if ``AGENTCTL_CRASH_AT`` names this point."""
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
