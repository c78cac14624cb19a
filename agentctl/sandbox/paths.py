"""Canonical path confinement for workspace reads and writes.

Invariants:
- a user path is non-empty, NUL-free and has no ``..`` component — rejected lexically before
  the filesystem is consulted; it is workspace-relative, except that a *write* may name an
  absolute path, which only an absolute ``writableRoots`` entry can grant;
- the decision is made on canonical paths (``os.path.realpath``: every symlink of the target
  and of every parent resolved), so a symlinked file or directory pointing outside is denied;
- a read target must lie inside the canonical workspace; a relative write target must lie
  inside the canonical workspace *and* a canonical writable root, judged from its nearest
  existing parent (the missing tail cannot contain links); an absolute write target must lie,
  judged the same way, inside the canonical form of an absolute writable root that is an
  existing directory (a mount: it is used as it is, never created, and a relative root never
  grants an absolute path); no writable roots ⇒ every write denied;
- the functions return the canonical path, and callers act on that path, not the lexical one;
- a target that is, or lies inside, one of the ``protected`` paths the coordinator sends (the
  ledger's own state: its database, the files beside it, its artifact store — real paths) is
  denied, for reading and writing alike; an existing target is also compared by identity
  (``samefile``), so another spelling of the same file (a hard link, a case-insensitive file
  system) is denied as well. A hard link to a file *inside* a protected directory is not found
  (that would need a walk of the directory); a write replaces its target by rename, so it
  cannot reach such a file's bytes anyway, a read could;
- ``open_regular`` opens a target without blocking (a FIFO with no writer would stall its
  caller past every timeout) and hands out regular files only.
Every denial raises ``PolicyDeniedError`` (exit 4) naming the path, never its content.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import BinaryIO

from agentctl.errors import PolicyDeniedError, RunFailedError

# An existing write target is read (its old content is the output's ``before``, and the diff):
# it is capped as a direct read is, and a write over a larger one is refused before anything.
MAX_EXISTING_TARGET_BYTES = 1024 * 1024


def not_text_target(rel: str) -> RunFailedError:
    """A write over an existing file that is not UTF-8 text: its old content cannot be
    recorded as the output's ``before`` (a diff, a compensation restores it), so the write is
    refused, as a read of the file is."""
    return RunFailedError(
        f"cannot write {rel!r}: the existing file is not valid UTF-8 text, so its content "
        "cannot be recorded as the write's `before`; nothing was written"
    )


def too_large_target(rel: str) -> RunFailedError:
    return RunFailedError(
        f"cannot write {rel!r}: the existing file is larger than {MAX_EXISTING_TARGET_BYTES} "
        "bytes, the most a write target may hold; nothing was written"
    )


def _check_lexical(rel: str) -> tuple[str, ...]:
    if not isinstance(rel, str) or rel == "":
        raise PolicyDeniedError("path denied: empty path")
    if "\x00" in rel:
        raise PolicyDeniedError("path denied: path contains a NUL byte")
    if os.path.isabs(rel) or rel.startswith("/"):
        raise PolicyDeniedError(f"path denied: {rel!r} is absolute; paths are workspace-relative")
    parts = _parts(rel)
    if not parts:
        raise PolicyDeniedError(f"path denied: {rel!r} names the workspace itself")
    return parts


def _parts(path: str) -> tuple[str, ...]:
    """The components of ``path`` (its leading ``/`` and ``.`` dropped); ``..`` is refused."""
    parts = tuple(p for p in PurePosixPath(path).parts if p not in ("", ".", "/"))
    if ".." in parts:
        raise PolicyDeniedError(f"path denied: {path!r} contains '..'")
    return parts


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def canonical_workspace(workspace: str) -> str:
    root = os.path.realpath(workspace)
    if not os.path.isdir(root):
        raise PolicyDeniedError(f"workspace {workspace!r} is not a directory")
    return root


def _refuse_protected(target: str, rel: str, protected: Sequence[str]) -> None:
    """Deny a canonical ``target`` that is, or lies inside, a ``protected`` path; an existing
    target is also compared by identity (a new one, a write's usual target, costs one stat)."""
    if not protected:
        return
    try:
        found: os.stat_result | None = os.stat(target)
    except (OSError, ValueError):
        found = None
    for own in protected:
        if _inside(target, own) or (found is not None and _is_file(found, own)):
            raise PolicyDeniedError(
                f"path denied: {rel!r} is agentctl's own ledger state ({own}): the run's "
                "database, the files beside it and its artifact store are never read or "
                "written by a workflow"
            )


def _is_file(found: os.stat_result, path: str) -> bool:
    """Whether ``path`` exists and is the file ``found`` describes (however it is spelled)."""
    try:
        return os.path.samestat(found, os.stat(path))
    except (OSError, ValueError):
        return False


def resolve_read(workspace: str, rel: str, protected: Sequence[str] = ()) -> str:
    """The canonical path of ``rel`` for reading; it must resolve inside the workspace and
    outside every ``protected`` path."""
    parts = _check_lexical(rel)
    root = canonical_workspace(workspace)
    target = os.path.realpath(os.path.join(root, *parts))
    if not _inside(target, root):
        raise PolicyDeniedError(f"path denied: {rel!r} resolves outside the workspace")
    _refuse_protected(target, rel, protected)
    return target


def _nearest_existing(root: str, parts: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """Split ``root/parts`` into its deepest existing prefix and the missing tail."""
    for cut in range(len(parts), -1, -1):
        candidate = os.path.join(root, *parts[:cut])
        if os.path.lexists(candidate):
            return candidate, parts[cut:]
    return root, parts


def _canonical_roots(root: str, writable_roots: list[str]) -> list[str]:
    result = []
    for entry in writable_roots:
        if not entry or "\x00" in entry:
            continue
        joined = entry if os.path.isabs(entry) else os.path.join(root, entry)
        result.append(os.path.realpath(joined))
    return result


def absolute_roots(writable_roots: list[str]) -> dict[str, str]:
    """Each absolute ``writableRoots`` entry and its canonical directory (symlinks resolved)."""
    return {
        entry: os.path.realpath(entry)
        for entry in writable_roots
        if entry.startswith("/") and "\x00" not in entry
    }


def _resolve_absolute_write(writable_roots: list[str], path: str, protected: Sequence[str]) -> str:
    """The canonical target of a write to absolute ``path``: inside an absolute root only."""
    if "\x00" in path:
        raise PolicyDeniedError("path denied: path contains a NUL byte")
    parts = _parts(path)
    roots = list(absolute_roots(writable_roots).values())
    if not roots:
        raise PolicyDeniedError(
            f"path denied: {path!r} is absolute and no writableRoots entry is; paths are "
            "workspace-relative, or inside an absolute writable root"
        )
    existing, tail = _nearest_existing("/", parts)
    target = os.path.join(os.path.realpath(existing), *tail)  # links followed, as below
    holding = [r for r in roots if _inside(target, r)]
    if not holding:
        raise PolicyDeniedError(f"path denied: {path!r} is outside every writable root")
    if target in roots:
        raise PolicyDeniedError(f"path denied: {path!r} names a writable root itself")
    # An absolute root is a mount the operator provides: a missing one is never created (the
    # write's parents would make it), so the write is refused rather than landing elsewhere.
    if not any(os.path.isdir(r) for r in holding):
        raise PolicyDeniedError(
            f"path denied: {path!r}: writable root {holding[0]} is not an existing directory"
        )
    _refuse_protected(target, path, protected)
    return target


def resolve_write(
    workspace: str, writable_roots: list[str], rel: str, protected: Sequence[str] = ()
) -> str:
    """The canonical target path of a write to ``rel``; it must fall inside a writable root
    (an absolute ``rel`` inside an absolute one) and outside every ``protected`` path."""
    if isinstance(rel, str) and rel.startswith("/"):
        return _resolve_absolute_write(writable_roots, rel, protected)
    parts = _check_lexical(rel)
    root = canonical_workspace(workspace)
    roots = _canonical_roots(root, writable_roots)
    if not roots:
        raise PolicyDeniedError(f"path denied: {rel!r}: no writable roots are configured")
    existing, tail = _nearest_existing(root, parts)
    # realpath of the existing part follows a symlinked target or parent wherever it points.
    target = os.path.join(os.path.realpath(existing), *tail)
    if not _inside(target, root):
        raise PolicyDeniedError(f"path denied: {rel!r} resolves outside the workspace")
    if not any(_inside(target, r) and _inside(r, root) for r in roots):
        raise PolicyDeniedError(f"path denied: {rel!r} is outside every writable root")
    if target in roots:
        raise PolicyDeniedError(f"path denied: {rel!r} names a writable root itself")
    _refuse_protected(target, rel, protected)
    return target


def open_regular(target: str, rel: str, action: str) -> BinaryIO:
    """``target`` open for reading when it is a regular file; anything else (a FIFO, a device,
    a socket) is refused with ``RunFailedError`` naming ``rel``, a directory with
    ``IsADirectoryError``; other ``OSError``s propagate."""
    fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(21, "Is a directory", target)
        raise RunFailedError(f"cannot {action} {rel!r}: not a regular file")
    return os.fdopen(fd, "rb")
