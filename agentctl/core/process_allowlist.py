"""``policy.processAllowlist``: which programs a process action may start (spec/dsl.md §7).

One decision shared by everything that judges a command — the request builder of a process
action (the run's denial), the worker's defence in depth and ``doctor`` — so they cannot
disagree about a name.

Invariants:
- a command is judged by its basename: the text after its last ``/``, exactly what
  ``os.path.basename`` gives on POSIX (``/usr/bin/git`` and ``git`` are both ``git``; a
  command ending in ``/`` has an empty name), compared exactly with the allowlist's entries;
- an empty name is never allowed (fail closed), whatever the list holds;
- pure: no file or environment is consulted (where the program is, is ``sandbox.program``).
"""

from __future__ import annotations

from collections.abc import Iterable


def process_name(command: str) -> str:
    """The name ``command`` is allowlisted under (its basename)."""
    return command.rsplit("/", 1)[-1]


def process_allowed(command: str, allowlist: Iterable[object]) -> bool:
    """True when ``command``'s name is an entry of ``allowlist``."""
    name = process_name(command)
    return bool(name) and name in set(allowlist)


def process_denial(command: str, allowlist: Iterable[object]) -> str | None:
    """Why ``command`` may not start under ``allowlist`` (the run's words), or None."""
    if process_allowed(command, allowlist):
        return None
    return f"process {process_name(command)!r} is not in policy.processAllowlist"
