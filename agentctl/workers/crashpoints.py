"""Named crash points for kill-and-recover tests (DESIGN.md §7).

Invariant: when ``AGENTCTL_CRASH_AT`` names the point reached, the process SIGKILLs itself on
the spot — no cleanup, no flush — exactly like a power cut of this one process. Workers may not
import ``agentctl.ledger``, which has the coordinator's twin of this helper.
"""

from __future__ import annotations

import os
import signal

CRASH_ENV = "AGENTCTL_CRASH_AT"


def crash_point(name: str) -> None:
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
