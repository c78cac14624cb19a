"""Where ``artifacts export`` and ``inspect --html`` may write: never onto the ledger's state.

An export replaces its destination (``--overwrite``), as a report does, so a destination that
is the ledger's database would turn every run's history into one blob's bytes, and one inside
the artifact store would replace or add files the store alone manages. Both are refused as bad input
(``ValidationError``, exit 2) before anything is written.

Invariants:
- the ledger's state is its database file, the files SQLite and the ledger keep beside it
  (``NAME-wal``, ``NAME-shm``, ``NAME-journal``, ``NAME.lock``, the ``NAME.workers``
  directory and what is in it), and the whole artifact store directory (``artifacts/``);
- paths are compared as real paths (symlinked parents, ``..``, ``./`` all resolved), and a
  destination that exists is also compared by identity (``samefile``), so no spelling of the
  same file gets through, on a case-insensitive file system included;
- on a server ledger (no database file) only the artifact store is guarded;
- ``ledger_state_paths`` lists the same state (and a server ledger's local companions, the
  ``.workers`` registry beside its ``location``) as real paths, for a run's file effects to
  refuse (``sandbox.paths``): workers never open the ledger, so they are told where it is.
"""

from __future__ import annotations

import os
from pathlib import Path

from agentctl.errors import ValidationError

# The names the ledger and SQLite give the files beside a database ``NAME``.
_BESIDE = ("-wal", "-shm", "-journal", ".lock", ".workers")


def refuse_ledger_state(
    dest: Path, database: Path | None, store_root: Path, *, doing: str = "export"
) -> None:
    """Refuse (exit 2) a ``dest`` that is the ledger's own state (module docstring); ``doing``
    names the write in the message ("export", "write the report")."""
    real = Path(os.path.realpath(dest))
    store, *beside = ledger_state_paths(database, store_root, None)
    if _covers(real, dest, Path(store)):
        raise ValidationError(
            f"refusing to {doing} to {dest}: it is inside the ledger's artifact store "
            f"{store_root}, which only the ledger writes; choose a path outside it"
        )
    for state in map(Path, beside):  # the database (first), then the names beside it
        if _covers(real, dest, state):
            own = state == Path(os.path.realpath(str(database)))
            what = "database file" if own else f"{state.name}, kept beside its database"
            where = "is" if real == state else "is inside"
            raise ValidationError(
                f"refusing to {doing} to {dest}: it {where} the ledger's {what} ({database}); "
                "writing there would destroy the ledger, so nothing was written"
            )


def _covers(real: Path, dest: Path, state: Path) -> bool:
    """Whether ``dest`` (real path ``real``) is ``state``, lies inside it, or is its file."""
    return real == state or real.is_relative_to(state) or _same(dest, state)


def ledger_state_paths(
    database: Path | None, store_root: Path, location: Path | None
) -> tuple[str, ...]:
    """The real paths of the ledger's own state (module docstring): the artifact store first,
    then each of ``database`` and ``location`` with the names kept beside it; no duplicates."""
    found = [os.path.realpath(store_root)]
    for base in (database, location):
        if base is None:
            continue
        own = os.path.realpath(base)
        found.extend(own + suffix for suffix in ("", *_BESIDE))
    return tuple(dict.fromkeys(found))


def _same(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` both exist and are one file (however either is spelled)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
