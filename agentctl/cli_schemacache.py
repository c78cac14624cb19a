"""The workflow models' core schema, kept between processes so a command does not rebuild it.

Building the pydantic schema of the workflow models is ~90 ms of every ``check``/``run``;
loading it back and building the validator from it takes ~2 ms (``core/dsl/prebuilt.py``).
The schema is stored as a pickle (it refers to our validator functions and classes by name)
in the user's cache directory: ``$XDG_CACHE_HOME/agentctl`` or ``~/.cache/agentctl``.

Invariants:
- a pickle runs code when loaded, so the file is loaded only if nobody but this user could
  have written it: the directory and the file are opened without following symlinks and
  must be owned by the effective user and writable by no one else (checked on the open
  descriptors, so a swap after the check changes nothing); the directory is created 0700 and
  the file 0600; anything else is ignored and the schema built as if there were no cache;
- the file starts with a fingerprint of everything the schema is made from — this Python,
  pydantic and pydantic-core versions, and the size and modification time of every source
  file of ``agentctl/core`` and ``agentctl/errors.py`` (what Python itself checks a cached
  ``.pyc`` against) — and is used only if the fingerprint matches; a mismatch rebuilds and
  replaces it (atomically: written aside, renamed);
- the cache only ever saves time: any failure to read or write it (no home directory, a
  read-only disk, a schema that cannot be pickled) silently falls back to building.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import stat
import sys
import tempfile
from pathlib import Path

import pydantic
import pydantic_core

import agentctl.errors
from agentctl.core.dsl import prebuilt

FORMAT = b"agentctl-workflow-schema-1"
FILE_NAME = "workflow-schema.pickle"
_MAX_BYTES = 16 * 1024 * 1024
_PACKAGE = Path(agentctl.errors.__file__).resolve().parent


def prepare_workflow_model() -> None:
    """Before the first workflow is validated: install the stored schema, or build and store."""
    if prebuilt.is_built():
        return
    directory = cache_dir()
    key = fingerprint()
    if directory is not None:
        schema = _read(directory, key)
        if schema is not None:
            prebuilt.use_prebuilt(schema)
            return
    schema = prebuilt.workflow_schema()  # builds the models: the slow path
    if directory is not None:
        _write(directory, key, schema)


def cache_dir() -> Path | None:
    """``$XDG_CACHE_HOME/agentctl``, else ``~/.cache/agentctl``; None without a home."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / "agentctl"


def fingerprint() -> bytes:
    """What the stored schema was made from (module docstring)."""
    digest = hashlib.sha256(FORMAT)
    versions = (sys.version, pydantic.VERSION, pydantic_core.__version__, str(_PACKAGE))
    digest.update("\0".join(versions).encode())
    sources = [os.path.join(_PACKAGE, "errors.py")]
    for root, dirs, files in os.walk(_PACKAGE / "core"):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        sources.extend(os.path.join(root, f) for f in sorted(files) if f.endswith(".py"))
    for source in sources:
        st = os.stat(source)
        digest.update(f"\0{source}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return FORMAT + b" " + digest.hexdigest().encode() + b"\n"


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


def _read(directory: Path, key: bytes) -> pydantic_core.CoreSchema | None:
    """The stored schema, if the file is private, whole and made from ``key``."""
    dir_fd = _open_dir(directory)
    if dir_fd is None:
        return None
    try:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        with os.fdopen(os.open(FILE_NAME, flags, dir_fd=dir_fd), "rb") as handle:
            st = os.fstat(handle.fileno())
            if not stat.S_ISREG(st.st_mode) or not _private(st) or st.st_size > _MAX_BYTES:
                return None
            if handle.readline() != key:
                return None
            schema = pickle.load(handle)
    except Exception:  # a missing, partial or stale file: build instead
        return None
    finally:
        os.close(dir_fd)
    return schema if isinstance(schema, dict) else None


def _write(directory: Path, key: bytes, schema: pydantic_core.CoreSchema) -> None:
    """Store ``schema`` under ``key``, atomically; any failure leaves no cache (never fails)."""
    with contextlib.suppress(Exception):
        data = pickle.dumps(schema, protocol=pickle.HIGHEST_PROTOCOL)
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        dir_fd = _open_dir(directory)
        if dir_fd is None:
            return
        os.close(dir_fd)
        fd, aside = tempfile.mkstemp(dir=directory, prefix=f".{FILE_NAME}.")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(key)
                handle.write(data)
            os.replace(aside, directory / FILE_NAME)
        except BaseException:
            os.unlink(aside)
            raise
