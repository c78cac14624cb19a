"""What a mutation would do, without doing it: check-mode previews and write diffs.

Invariants: nothing here writes; a path is confined by the same policy as a real write (a
denied path is denied in a preview too); reading the current content of a write target is
the only observation, and it happens before any effect row exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.textdiff import unified_diff
from agentctl.sandbox.paths import (
    MAX_EXISTING_TARGET_BYTES,
    not_text_target,
    open_regular,
    resolve_write,
    too_large_target,
)


def current_content(
    workspace: str, roots: list[str], path: str, protected: Sequence[str] = ()
) -> str | None:
    """The text now at a write target (None when absent); a target that is not UTF-8 text
    fails as the write itself would (``not_text_target``), and so does a ``protected`` one."""
    target = resolve_write(workspace, roots, path, protected)
    try:
        with open_regular(target, path, "write") as handle:
            raw = handle.read(MAX_EXISTING_TARGET_BYTES + 1)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    if len(raw) > MAX_EXISTING_TARGET_BYTES:
        raise too_large_target(path)  # the write itself would be refused: so is its preview
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise not_text_target(path) from exc


def write_output(path: str, before: str | None, after: str, *, diff: bool) -> JsonObject:
    """The ``builtin.write`` output shape for a change that is previewed or found unchanged."""
    changed = before != after
    return {
        "status": "changed" if changed else "unchanged",
        "changed": changed,
        "before": before,
        "after": after,
        "diff": unified_diff(path, before, after) if (diff and changed) else None,
        "path": path,
        "predictability": "partially_predictable",
    }


def requires_execution(**details: JsonValue) -> JsonObject:
    """Check mode's stand-in for work whose outcome only a real run can know."""
    return {"status": "requires_execution", "changed": False, **details}


def is_stand_in(value: object) -> bool:
    """Whether ``value`` is a ``requires_execution`` stand-in from this preview."""
    return isinstance(value, Mapping) and value.get("status") == "requires_execution"
