"""The other ledgers that share an artifact store, and the blobs they name.

The store lives at ``<db dir>/artifacts/`` (spec/cli.md §8), so every SQLite ledger in one
directory uses the same blob files: content-addressed, one file serves every ledger whose
rows name its digest. A blob file that one ledger no longer names (or never named) may be
another's bytes. Before this process removes a blob file — garbage collection, recovery of
``trash/``, bytes a budget refused — it asks here which digests the other ledgers name.

Invariants:
- a sibling is any other file in the directory with SQLite's header and our application id
  (or none: ledgers older than it); it is opened read-only (``mode=ro``), never written, and
  only its ``artifact_blobs`` digests are read;
- a sibling that cannot be read (locked out, damaged, not ours to open) makes every digest
  count as named: when in doubt a file is kept, since a kept file costs disk space and a
  removed one loses another ledger's bytes;
- a SQLite file without an ``artifact_blobs`` table (another program's, or a ledger older than
  the artifact store) names nothing;
- only committed rows are seen: another ledger's writer may be about to name a file (a large
  value's blob is written inside its transaction), so a file no ledger names is collected
  only once it is old (``gc.UNTRACKED_GRACE_S``) whenever other ledgers share the store.

Known limit (kept): a blob this ledger collects (its row unreachable, its file old) whose very
bytes another ledger's open transaction has just decided to reuse (a large value equal to it,
found in place and so not written again) can still go, in the milliseconds before that
transaction commits; the other ledger then names a missing file and its ``artifacts verify``
says so (exit 5). Closing it needs every writer of every ledger under the store lock.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agentctl.ledger.migrations import APPLICATION_ID

_SQLITE_HEADER = b"SQLite format 3\x00"
_LEDGER_SUFFIXES = ("-wal", "-shm", "-journal")


@dataclass(frozen=True)
class SiblingBlobs:
    """What the other ledgers beside this one name: their digests, and those that could not
    be read (then every digest counts as named)."""

    digests: frozenset[str]
    unreadable: tuple[Path, ...]
    others: int = 0  # how many other ledgers share the store (read or not)

    def names(self, digest: str) -> bool:
        """Whether another ledger may still need the blob ``digest``'s file."""
        return bool(self.unreadable) or digest in self.digests

    def keeping(self, names: Iterable[str]) -> set[str]:
        """The digests of the blob file ``names`` (hex) that another ledger may need."""
        return {d for d in ("sha256:" + n for n in names) if self.names(d)}


NONE = SiblingBlobs(frozenset(), ())


def _may_be_ledger(path: Path) -> bool:
    """SQLite's header, and the application id (bytes 68–71) ours or unset."""
    if path.name.endswith(_LEDGER_SUFFIXES) or not path.is_file():
        return False
    try:
        with open(path, "rb") as fh:
            header = fh.read(100)
    except OSError:
        return False
    app_id = int.from_bytes(header[68:72], "big")
    return header.startswith(_SQLITE_HEADER) and app_id in (0, APPLICATION_ID)


def _same_file(a: Path, b: Path | None) -> bool:
    try:
        return b is not None and os.path.samefile(a, b)
    except OSError:
        return False


def _digests_of(path: Path) -> frozenset[str]:
    """The digests ``path``'s ``artifact_blobs`` names; raises ``sqlite3.Error`` when it cannot
    be read. The wait is short: this runs under the store lock, and a ledger that stays busy
    only counts as unreadable (every file kept)."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=0.5)
    try:
        has_table = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'artifact_blobs'"
        ).fetchone()
        if has_table is None:
            return frozenset()
        return frozenset(str(r[0]) for r in conn.execute("SELECT digest FROM artifact_blobs"))
    finally:
        conn.close()


def sibling_blobs(root: Path, own: Path | None) -> SiblingBlobs:
    """The digests named by the SQLite ledgers beside ``root`` other than ``own`` (this
    ledger's file; None for a ledger on a server, whose store may still sit beside files)."""
    try:
        entries = sorted(root.parent.iterdir())
    except OSError:
        return SiblingBlobs(frozenset(), (root.parent,))
    digests: set[str] = set()
    unreadable: list[Path] = []
    read = 0
    for path in entries:
        if _same_file(path, own) or not _may_be_ledger(path):
            continue
        try:
            digests |= _digests_of(path)
            read += 1
        except sqlite3.Error:
            unreadable.append(path)
    others = len(unreadable) + read
    if not others:
        return NONE
    return SiblingBlobs(frozenset(digests), tuple(unreadable), others)
