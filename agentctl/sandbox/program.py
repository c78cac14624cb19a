"""Where a host process starts and which file it executes — found without starting it.

Job: the directory a process action runs in (``process_cwd``, which the worker uses before
every spawn) and the program its spawn would execute (``find_program``, which ``doctor``
uses to answer the same question ahead of a run).

Invariants:
- ``process_cwd`` is the canonical workspace (no ``cwd``, or one made of ``.`` and ``/`` only:
  ``.``, ``./``), or the action's ``cwd`` inside it (relative, no ``..``, an existing directory
  once symlinks are resolved); anything else is a ``PolicyDeniedError``, as in a run;
- ``find_program`` follows ``subprocess.Popen`` (``sandbox.spawn``) exactly: a command with a
  ``/`` names one file, relative to the child's cwd (the child changes directory before it
  execs); a bare name is looked up in ``os.get_exec_path`` of the child's environment — the
  ``PATH`` its action sets, else ``os.defpath`` (a run clears the environment), never the
  caller's ``PATH``; a relative ``PATH`` entry is relative to the child's cwd; the first
  regular file that may be executed wins, as exec skips a file it may not execute;
- it only looks (stat, access): nothing is created, opened or run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from agentctl.errors import PolicyDeniedError
from agentctl.sandbox.paths import canonical_workspace, resolve_read

ProgramStatus = Literal["found", "not_found", "not_executable"]


def process_cwd(workspace: str, cwd: str | None) -> str:
    """The canonical directory a host process of ``workspace`` starts in."""
    target = confined_cwd(workspace, cwd)
    if not os.path.isdir(target):
        raise PolicyDeniedError(f"process cwd {cwd!r} is not a directory in the workspace")
    return target


def confined_cwd(workspace: str, cwd: str | None) -> str:
    """``cwd`` as a canonical path inside the workspace, whether or not it exists yet: the
    policy half of ``process_cwd`` (no ``..``, not absolute, no symlink out)."""
    if cwd is None or names_workspace(cwd):
        return canonical_workspace(workspace)
    return resolve_read(workspace, cwd)


def names_workspace(cwd: str) -> bool:
    """Whether ``cwd`` spells the workspace itself: relative, every segment empty or ``.``
    (``""``, ``.``, ``./``, ``.//.``). ``/`` is absolute, not the workspace: it stays denied."""
    return not cwd.startswith("/") and set(cwd.split("/")) <= {"", "."}


@dataclass(frozen=True)
class ProgramLookup:
    """What a spawn of ``command`` would find: the file it executes, or why none."""

    status: ProgramStatus
    detail: str  # the file (found), else what was looked at and why it cannot run


def exec_path(path: str | None) -> list[str]:
    """The directories a bare name is looked up in, given the child's ``PATH`` (None: unset)."""
    return os.get_exec_path({} if path is None else {"PATH": path})


def find_program(command: str, cwd: str, path: str | None) -> ProgramLookup:
    """The file ``command`` runs as, started in ``cwd`` with ``PATH`` = ``path`` (see the
    module invariants)."""
    if os.path.dirname(command):
        target = os.path.join(cwd, command)
        shown = os.path.normpath(target)
        if _executable(target):
            return ProgramLookup("found", shown)
        if os.path.lexists(target):
            return ProgramLookup("not_executable", f"{shown} is not an executable file")
        return ProgramLookup("not_found", f"{shown} does not exist")
    candidates = [os.path.join(cwd, d, command) for d in exec_path(path)]
    found = next((c for c in candidates if _executable(c)), None)
    if found is not None:
        return ProgramLookup("found", os.path.normpath(found))
    where = os.pathsep.join(exec_path(path))
    present = [os.path.normpath(c) for c in candidates if os.path.lexists(c)]
    if present:
        return ProgramLookup("not_executable", f"{present[0]} is not an executable file")
    return ProgramLookup("not_found", f"{command} is in no directory of PATH {where}")


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)
