"""The mode a plain write gives a file, for the writers that replace a file atomically
(through a temporary file, created 0600): the workspace writes of ``builtin.write`` and the
CLI's ``schema --write`` / ``migrate --write``.

Invariants:
- an existing file keeps its permission bits; a new one gets 0666 less the process's umask,
  exactly what ``open(path, "w")`` would leave (a private umask keeps a new file private);
- the umask is read once per process, without changing it where Linux tells it
  (``/proc/self/status``); elsewhere it is set and put straight back, on the first call;
- a leaf like ``errors``: standard library only, so the CLI and the workers may both use it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat


@functools.cache
def process_umask() -> int:
    """The umask this process creates files under."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status", "rb") as status:
        for line in status:
            if line.startswith(b"Umask:"):
                return int(line.split()[1], 8)
    current = os.umask(0o022)  # reading the umask means setting it: put it straight back
    os.umask(current)
    return current


def plain_write_mode(path: str | os.PathLike[str]) -> int:
    """The permission bits ``open(path, "w")`` would leave ``path`` with."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return 0o666 & ~process_umask()
