"""The human views of the state commands: ``db stats|migrate``, ``artifacts
inspect|verify|export|gc`` and ``memory get|put``.

Each answers in a few lines what the operator asked — the schema and what the file holds, whether
every blob still hashes to its name, what a collection removed or would remove, a stored value —
where the JSON envelope (``--output json``, or ``--verbose`` beside the view) keeps every field.
Invariants: digests and paths are printed whole (they are pasted into the next command); a view
never prints more than the data holds; nothing here reads the database.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from agentctl.core.jsonvalue import JsonObject, JsonValue, as_list, as_object
from agentctl.render import Settings, dump_json

View = Callable[[Settings], str]


def _lines(*lines: str) -> View:
    text = "\n".join(lines) + "\n"
    return lambda _settings: text


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _size(n: JsonValue) -> str:
    if not isinstance(n, int):
        return "-"
    if n < 1024:
        return f"{n} bytes"
    value = float(n)
    for unit in ("KiB", "MiB"):
        value /= 1024
        if value < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} GiB"


def db_stats_view(data: JsonObject) -> View:
    """Schema version, size, and the tables that hold rows (the empty ones summed up)."""
    counts = {k: v for k, v in as_object(data.get("counts")).items() if isinstance(v, int)}
    held = sorted((t, n) for t, n in counts.items() if n)
    width = max((len(t) for t, _ in held), default=0)
    schema = (
        f"schema {data.get('schemaVersion')} (this agentctl: {data.get('supportedSchemaVersion')})"
    )
    lines = [f"{data.get('path')}  {schema}  {_size(data.get('sizeBytes'))}"]
    lines += [f"  {t.ljust(width)}  {n}" for t, n in held]
    empty = len(counts) - len(held)
    if empty and held:
        lines.append(f"  ({_count(empty, 'other table')} empty)")
    elif empty:  # a new database: no "other" tables beside none listed
        lines.append(f"  (all {_count(empty, 'table')} empty)")
    return _lines(*lines)


def db_migration_view(data: Mapping[str, object]) -> View:
    listed = data.get("applied")
    applied = [str(v) for v in listed] if isinstance(listed, list) else []
    if not applied:
        return _lines(f"schema {data.get('to')}: up to date, nothing to migrate")
    if data.get("from") == 0:
        return _lines(f"created a new database at schema {data.get('to')}")
    return _lines(f"migrated schema {data.get('from')} → {data.get('to')} ({', '.join(applied)})")


def artifact_inspection_view(data: JsonObject) -> View:
    blob = as_object(data.get("blob"))
    refs = [as_object(r) for r in as_list(data.get("references"))]
    verified = blob.get("lastVerifiedAt") or "never"
    lines = [str(blob.get("digest")), f"  {_size(blob.get('sizeBytes'))}  verified {verified}"]
    lines.append(f"  {_count(len(refs), 'reference')}")
    lines += [f"    {r.get('runId')}  task {r.get('taskId')}  {r.get('path')}" for r in refs]
    return _lines(*lines)


def artifact_verification_view(data: JsonObject) -> View:
    checked = [as_object(a) for a in as_list(data.get("artifacts"))]
    bad = [a for a in checked if not a.get("valid")]
    lines = [f"{_count(len(checked), 'blob')} checked: {'all valid' if not bad else 'MISMATCH'}"]
    lines += [f"  {a.get('digest')}  {a.get('detail') or 'does not hash to its name'}" for a in bad]
    return _lines(*lines)


def artifact_export_view(data: JsonObject) -> View:
    return _lines(
        f"wrote {data.get('destination')} ({_size(data.get('bytes'))}, {data.get('digest')})"
    )


def _gc_lines(report: JsonObject, dry_run: bool) -> list[str]:
    verb = "would remove" if dry_run else "removed"
    blobs = [str(as_object(b).get("digest")) for b in as_list(report.get("blobs"))]
    # Both named as paths under the artifact store, so an operator can find them.
    untracked = [f"  {f} (not a stored blob)" for f in as_list(report.get("untrackedFiles"))]
    leftover = [f"  tmp/{f} (temporary leftover)" for f in as_list(report.get("tmpFiles"))]
    stray = len(untracked) + len(leftover)
    what = f"{_count(len(blobs), 'blob')} and {_count(stray, 'stray file')}"
    lines = [f"artifacts: {verb} {what}, {_size(report.get('bytes'))}"]
    return lines + [f"  {d}" for d in blobs] + untracked + leftover


def artifact_gc_view(data: JsonObject) -> View:
    dry = data.get("dryRun") is True
    lines = [f"unreferenced since before {data.get('before')}"]
    return _lines(*lines, *_gc_lines(as_object(data.get("report")), dry))


def memory_value_view(data: JsonObject) -> View:
    """``memory get``: the value itself, as JSON, under a line saying where it lives."""
    expires = f", expires {data['expiresAt']}" if data.get("expiresAt") else ""
    head = f"{data.get('namespace')}/{data.get('key')}  (updated {data.get('updatedAt')}{expires})"
    return _lines(head, dump_json(data.get("value"), indent=2))


def memory_write_view(data: JsonObject) -> View:
    expires = f", expires {data['expiresAt']}" if data.get("expiresAt") else ""
    return _lines(f"wrote {data.get('namespace')}/{data.get('key')}{expires}")
