"""Running a short helper program (a ``{process}`` secret reference) inside hard bounds.

Invariants (spec/cli.md §12, the bounds of §10 applied to a helper):
- argv only, no shell, an empty environment, stdin ``/dev/null``, stderr discarded, every other
  descriptor closed; the helper leads its own process group;
- at most ``limit + 1`` bytes of stdout are ever read: one more byte than the limit is enough to
  know it overflowed, so a flooding helper costs no memory beyond its limit;
- the helper's whole process group is SIGKILLed when it overflows, outlives ``timeout`` (output
  and exit both count against it) and also after a normal exit, before the leader is reaped
  (its zombie keeps the group id reserved): nothing it started outlives it;
- the outcome is a frozen ``HelperRun``; raising is left to the caller, which knows the
  reference it names (OSError from a failed start propagates).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Literal

_CHUNK = 65536


@dataclass(frozen=True)
class HelperRun:
    """How a helper ended: ``exited`` (with ``returncode``), ``overflow`` or ``timeout``."""

    ended: Literal["exited", "overflow", "timeout"]
    stdout: bytes
    returncode: int | None = None


def _read_bounded(stream: IO[bytes], limit: int, deadline: float) -> tuple[bytes, str | None]:
    """Stdout up to ``limit + 1`` bytes; the second item names what stopped the read early."""
    out = bytearray()
    with selectors.DefaultSelector() as sel:
        sel.register(stream, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(out), "timeout"
            if not sel.select(left):
                continue
            chunk = os.read(stream.fileno(), min(_CHUNK, limit + 1 - len(out)))
            if not chunk:
                return bytes(out), None
            out += chunk
            if len(out) > limit:
                return bytes(out), "overflow"


def _wait_unreaped(pid: int, deadline: float) -> bool:
    """Whether ``pid`` exited by ``deadline``, leaving it a zombie (not reaped)."""
    flags = os.WEXITED | os.WNOWAIT | os.WNOHANG
    while time.monotonic() < deadline:
        if os.waitid(os.P_PID, pid, flags) is not None:
            return True
        time.sleep(0.005)
    return os.waitid(os.P_PID, pid, flags) is not None


def run_helper(argv: Sequence[str], *, timeout: float, limit: int) -> HelperRun:
    """Run ``argv`` under the module's bounds."""
    proc = subprocess.Popen(
        list(argv),
        env={},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        process_group=0,
        close_fds=True,
    )
    deadline = time.monotonic() + timeout
    try:
        assert proc.stdout is not None  # stdout=PIPE above
        data, stopped = _read_bounded(proc.stdout, limit, deadline)
        if stopped is None and not _wait_unreaped(proc.pid, deadline):
            stopped = "timeout"
    finally:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    if stopped == "overflow":
        return HelperRun("overflow", data)
    if stopped == "timeout":
        return HelperRun("timeout", data)
    return HelperRun("exited", data, proc.returncode)
