"""Path policy of an effect's request, judged before the effect is requested or held.

Job: deny a file read, a file write or a process working directory that leaves its bounds
(spec/dsl.md §7: reads inside the workspace, writes inside a writable root, process ``cwd``
inside the workspace; ``..`` and symlink escapes rejected) *before* the coordinator records
the effect or asks anyone to approve it, so a denial is exit 4 with no effect and no approval,
as a denial by ``toolsDeny`` or ``processAllowlist`` is — never a pause for an approval that
could only end in the same denial.

Invariants: which path an operation confines is the registry's word (``Operation.confines`` of
the action whose effect operation it is — a tool performing that action shares it); the same
functions as the worker's (``sandbox.paths``, ``sandbox.program``), so
the judgement cannot differ; the worker judges again when it executes (the filesystem may
change while an approval is pending); only confinement is judged here, never existence (a
directory may appear before the process starts); a value of the wrong type is left to the
worker's own refusal.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentctl.core.jsonvalue import JsonValue
from agentctl.core.registry import find
from agentctl.sandbox.paths import resolve_read, resolve_write
from agentctl.sandbox.program import confined_cwd


def _strings(value: JsonValue) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def confine(operation: str, request: Mapping[str, JsonValue]) -> None:
    """Raise ``PolicyDeniedError`` when ``request`` (of effect ``operation``) names a path
    its policy denies; anything else passes."""
    entry = find(operation)
    confines = entry.confines if entry is not None else None
    workspace = request.get("workspace")
    if confines is None or not isinstance(workspace, str):
        return
    path = request.get("path")
    protected = _strings(request.get("protectedPaths"))
    if confines == "read" and isinstance(path, str):
        resolve_read(workspace, path, protected)
    elif confines == "write" and isinstance(path, str):
        resolve_write(workspace, _strings(request.get("writableRoots")), path, protected)
    elif confines == "cwd":
        cwd = request.get("cwd")
        if isinstance(cwd, str):  # none: the workspace itself, in bounds by definition
            confined_cwd(workspace, cwd)
