"""The boot anchor: one boot time per boot, the same for every agentctl process of a user.

A process's start time is its start in clock ticks since boot plus the boot time. The kernel's
boot time (``btime`` in ``/proc/stat``) is "wall clock now − time since boot", so it moves
whenever the wall clock is stepped (an NTP step, a VM resume, ``date -s``): two readings of one
process's start time on either side of a step differ by the step, and a live lease owner
would be taken for a dead one. The anchor is the ``btime`` that the first agentctl process of
this boot read; later processes read the anchor instead of ``btime``, so their readings of a
process agree exactly, whatever the clock did in between. It is a real ``btime``, so a value
written with it is also what an older agentctl (which adds the current ``btime``) reads while
the clock has not been stepped since the anchor was taken.

Where it lives: ``/dev/shm/agentctl-btime-<euid>-<boot id>`` (``/tmp`` where there is no
``/dev/shm``). Fixed paths, not ``$TMPDIR``: shells with different temporary folders must
find the same file. ``/dev/shm`` is a tmpfs emptied at boot; the boot id
(``/proc/sys/kernel/random/boot_id``) in the name keeps a file of an earlier boot from being
read when the folder survives a reboot. One file per effective user: a file is trusted only
when it is a regular file owned by this user and writable by no one else, since another user
who could replace it would make this user's processes disagree about their own runs. A
process of another user (two users sharing one ledger) is read with that user's anchor
(``user_anchor``): a file that only that user can have written, read and never written here.

Publication: the value is written to a private temporary file which is then hard-linked to
the anchor's name; ``link`` fails when the name exists, so the first writer wins and a reader
never sees a partial file. A loser reads the winner's value.

Fallback: where there is no boot id, no folder, the file cannot be written or read, or it is
not trusted (corrupt, partial, another user's), there is no anchor and the caller uses the
current ``btime``: the reading agentctl used before anchors, right until the clock is
stepped. A bad file is never repaired here (two repairers could disagree); it disappears at
the next boot, or when removed by hand.

Invariants: the anchor of a process never changes during its life (it is read once); the file
holds exactly one line, the decimal ``btime`` and a newline.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import stat

# Module-level so that tests can point them at copies (a fake btime simulates a clock step).
BTIME_PATH = "/proc/stat"
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
ANCHOR_DIRS = ("/dev/shm", "/tmp")

_BOOT_ID = re.compile(r"\A[0-9a-f-]{1,64}\Z")
_CONTENT = re.compile(rb"\A([0-9]{1,15})\n\Z")


class _Untrusted(Exception):
    """The anchor file exists but is not one this process may believe."""


def read_btime() -> float:
    """The kernel's boot time now (it moves when the wall clock is stepped)."""
    with open(BTIME_PATH, "rb") as fh:
        return float(next(line for line in fh if line.startswith(b"btime")).split()[1])


@functools.cache
def boot_anchor() -> float | None:
    """This boot's anchor, published by the first process that asked; None where there is
    none to trust (the caller then adds the current ``btime``, as agentctl did before)."""
    uid = os.geteuid()
    path = anchor_path(uid)
    if path is None:
        return None
    try:
        return _read_anchor(path, uid)
    except FileNotFoundError:
        pass
    except (OSError, _Untrusted):
        return None
    try:
        _publish(path, read_btime())
        return _read_anchor(path, uid)
    except (OSError, ValueError, StopIteration, IndexError, _Untrusted):
        return None


def user_anchor(uid: int) -> float | None:
    """Another user's anchor of this boot, as that user published it; None where there is
    none to trust. Not remembered: the user's first process may publish it later."""
    path = anchor_path(uid)
    try:
        return None if path is None else _read_anchor(path, uid)
    except (OSError, _Untrusted):
        return None


def anchor_path(uid: int) -> str | None:
    """Where the user's anchor of this boot lives, or None without a boot id or a folder."""
    try:
        with open(BOOT_ID_PATH, encoding="ascii") as fh:
            boot_id = fh.read().strip()
    except (OSError, ValueError):
        return None
    folder = next((d for d in ANCHOR_DIRS if os.path.isdir(d)), None)
    if folder is None or not _BOOT_ID.match(boot_id):
        return None
    return os.path.join(folder, f"agentctl-btime-{uid}-{boot_id}")


def _read_anchor(path: str, uid: int) -> float:
    # O_NOFOLLOW: a symlink planted under this name is not followed to someone else's file.
    # O_NONBLOCK: the folder is writable by every user, and opening a FIFO planted under this
    # name would block until someone writes to it — inside a lease transaction, holding the
    # database's write lock; non-blocking, it is opened at once and refused as not regular.
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != uid:
            raise _Untrusted(path)
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise _Untrusted(path)
        content = os.read(fd, 64)
    finally:
        os.close(fd)
    match = _CONTENT.match(content)
    if match is None:
        raise _Untrusted(path)
    return float(match.group(1))


def _publish(path: str, btime: float) -> None:
    """Make ``btime`` the anchor unless one exists already (then that one stays)."""
    import tempfile  # once a boot: not on every run's start

    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".agentctl-btime-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(b"%d\n" % int(btime))
        with contextlib.suppress(FileExistsError):  # another process won: its value stands
            os.link(tmp, path)
    finally:
        os.unlink(tmp)
