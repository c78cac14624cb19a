"""Files the CLI keeps between its runs to start faster, in the user's cache directory.

``$XDG_CACHE_HOME/agentctl``, else ``~/.cache/agentctl``. What is kept there is code in
effect (a pickle, marshalled code objects), so it is trusted exactly as far as the user's
own files are.

Invariants:
- a file is read only if nobody but this user could have written it: the directory and the
  file are opened without following symlinks and must be owned by the effective user and
  writable by no one else (checked on the open descriptors, so a swap after the check
  changes nothing); the directory is created 0700 and the files 0600;
- every file starts with a key line naming what its content was made from; a file whose
  key differs is ignored (and replaced by the next write);
- writes are atomic (a private file written aside, then renamed);
- nothing here ever fails a command: a missing home, a read-only disk or a foreign file
  means "no cache" (None / nothing written).

The stores that replace a private CPython function (``dataclass_codes``, ``regex_codes``)
share ``written_against``, their check that the function is the one they were written for.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MAX_BYTES = 16 * 1024 * 1024


def cache_dir() -> Path | None:
    """``$XDG_CACHE_HOME/agentctl``, else ``~/.cache/agentctl``; None without a home."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / "agentctl"


def _private(st: os.stat_result) -> bool:
    """Owned by this user and writable by no one else."""
    return st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _open_dir(directory: Path) -> int | None:
    """A descriptor of ``directory`` if it is a private real directory, else None."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    if not _private(os.fstat(fd)):
        os.close(fd)
        return None
    return fd


def read(name: str, key: bytes) -> bytes | None:
    """The content stored as ``name`` under ``key`` (one line, ending in a newline), if the
    file is private and was made from ``key``; else None."""
    directory = cache_dir()
    dir_fd = None if directory is None else _open_dir(directory)
    if dir_fd is None:
        return None
    try:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        with os.fdopen(os.open(name, flags, dir_fd=dir_fd), "rb") as handle:
            st = os.fstat(handle.fileno())
            if not stat.S_ISREG(st.st_mode) or not _private(st) or st.st_size > MAX_BYTES:
                return None
            if handle.readline() != key:
                return None
            return handle.read()
    except OSError:
        return None
    finally:
        os.close(dir_fd)


def read_pickled(name: str, key: bytes) -> dict[str, object] | None:
    """The dict pickled as ``name`` under ``key`` (``read``'s trust applies); None if there is
    none, or the file holds anything else or cannot be unpickled."""
    content = read(name, key)
    if content is None:
        return None
    import pickle  # only the stores that are pickles need it

    try:
        found = pickle.loads(content)
    except Exception:  # a partial or unreadable file: build instead
        return None
    return found if isinstance(found, dict) else None


def write(name: str, key: bytes, content: bytes) -> None:
    """Store ``content`` as ``name`` under ``key``, atomically; never fails."""
    directory = cache_dir()
    if directory is None or len(content) > MAX_BYTES:
        return
    with contextlib.suppress(OSError):
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        dir_fd = _open_dir(directory)
        if dir_fd is None:
            return  # not ours alone: writing there would only feed a file nobody reads
        os.close(dir_fd)
        import tempfile  # only when writing, which a warm cache never does

        fd, aside = tempfile.mkstemp(dir=directory, prefix=f".{name}.")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(key)
                handle.write(content)
            os.replace(aside, directory / name)
        except BaseException:
            os.unlink(aside)
            raise


def read_entries(name: str, key: bytes) -> dict[Any, Any]:
    """The marshalled dict stored as ``name`` under ``key`` (``read``); empty when there is
    none or it is damaged. Its entries are the caller's to check."""
    content = read(name, key)
    if content is None:
        return {}
    try:
        known = marshal.loads(content)
    except (EOFError, ValueError, TypeError):
        return {}
    return known if isinstance(known, dict) else {}


def write_entries(
    name: str, key: bytes, known: dict[Any, Any], used: dict[Any, Any], most: int
) -> None:
    """Store the entries ``known`` (``write``); past ``most`` of them (many upgrades later),
    only those this process ``used``. Never raises: a cache never changes the outcome."""
    with contextlib.suppress(Exception):
        write(name, key, marshal.dumps(known if len(known) <= most else used))


def written_against(function: object, parameters: tuple[str, ...]) -> bool:
    """Whether ``function`` is the private CPython 3.11 one a replacement was written against:
    this interpreter's version, and a Python function whose parameters begin as expected."""
    code = getattr(function, "__code__", None)
    if sys.version_info[:2] != (3, 11) or code is None:
        return False
    return bool(code.co_varnames[: len(parameters)] == parameters)


def package_sources(package: Path, files: Sequence[str], trees: Sequence[str]) -> list[str]:
    """The paths of ``files`` and of every ``.py`` file under ``trees`` of ``package``, in a
    stable order (what ``sources_key`` fingerprints)."""
    sources = [os.path.join(package, name) for name in files]
    for tree in trees:
        for root, dirs, names in os.walk(package / tree):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            sources.extend(os.path.join(root, f) for f in sorted(names) if f.endswith(".py"))
    return sources


def sources_key(fmt: bytes, versions: Sequence[str], sources: Sequence[str]) -> bytes:
    """A file's key line: ``fmt`` and a digest of ``versions`` and of each source's size and
    modification time (what Python itself checks a cached ``.pyc`` against)."""
    digest = hashlib.sha256(fmt)
    digest.update("\0".join(versions).encode())
    for source in sources:
        st = os.stat(source)
        digest.update(f"\0{source}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return fmt + b" " + digest.hexdigest().encode() + b"\n"
