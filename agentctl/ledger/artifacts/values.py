"""Large ledger values: a long JSON string lives in the artifact store once, the row names it.

Job: the codec of the ledger's content columns — what a run carries of its users' data
(effect requests and results, task outputs and memory deltas, run inputs, memory and output,
the run's document and plans, tool-call inputs and outputs, approvals' inputs, long-term
memory, reconciliation evidence and results, audit payloads). See
docs/adr/0008-large-values-in-the-artifact-store.md.

Invariants:
- a string of ``SPILL_MIN_CHARS`` characters or more is stored as a blob of its UTF-8 bytes and
  replaced in the row by ``{"$artifact": "sha256:<hex>", "bytes": <n>}``: one blob per content,
  whichever rows, runs or file artifacts (the same bytes written to a file) refer to it;
- the blob is complete and fsynced, with its directory, before the row naming it can commit: it
  is written inside the caller's write transaction. Its temporary file sits beside it, never in
  ``tmp/`` (which GC and recovery clear holding only the store lock); GC looks for untracked
  blob files only inside its own write transaction, which cannot overlap this one;
- every such blob is pinned by a ``value_blobs`` row committed with the row that names it, and
  is never collected;
- decoding is exact: an object of the value that itself has a ``"$artifact"`` key is stored
  escaped as ``{"$artifact": {"literal": {...}}}``; equal values still store equal text;
- a value is read back only from a blob of the recorded size and digest: a missing or altered
  blob is a ``PersistenceError`` naming it (exit 5), never a silently different value;
- a ledger without a file (``:memory:``) keeps every value inline.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path

from agentctl.core.canonical import canonical_json
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_object
from agentctl.errors import PersistenceError, from_os_error
from agentctl.ledger.artifacts.refs import pin_value_blob_txn
from agentctl.ledger.artifacts.store import LARGE_BLOB_BYTES, blob_file, blob_problem, fsync_dir
from agentctl.ledger.rows import loads_opt
from agentctl.ledger.sql import Db

SPILL_MIN_CHARS = LARGE_BLOB_BYTES
MARKER = "$artifact"
_LITERAL = "literal"
_QUOTED_MARKER = json.dumps(MARKER)
_RESTORE_HINT = (
    "large values live in artifacts/ beside the database: restore it together with the "
    "database from the same backup (docs/operations.md, Backups)"
)


def _store_root(conn: Db) -> Path | None:
    """The artifact store beside the connection's database file (None for ``:memory:``); a
    backend without one (PostgreSQL) names its store on the connection."""
    if hasattr(conn, "artifacts_root"):
        return Path(conn.artifacts_root)
    for row in conn.execute("PRAGMA database_list"):
        if row[1] == "main":
            return Path(row[2]).parent / "artifacts" if row[2] else None
    return None


# --------------------------------------------------------------------------- writing


def dumps_value(conn: Db, value: object, now: str) -> str:
    """Canonical JSON of ``value`` for a content column, its long strings stored as blobs.

    Runs inside the caller's write transaction (the blob rows commit with the row).
    """
    text = canonical_json(value)
    if len(text) < SPILL_MIN_CHARS and _QUOTED_MARKER not in text:
        return text  # ``spill_text``'s first case, without its call: ~8 values per effect step
    return spill_text(conn, text, now)


def dumps_value_opt(conn: Db, value: object, now: str) -> str | None:
    return None if value is None else dumps_value(conn, value, now)


def spill_text(conn: Db, text: str, now: str) -> str:
    """``text`` (canonical JSON, e.g. a stored plan) with its long strings stored as blobs."""
    if len(text) < SPILL_MIN_CHARS and _QUOTED_MARKER not in text:
        return text  # short (no string to store apart) and nothing to escape: ~11 per step
    if unchanged_by_spilling(text):
        return text  # nothing to store apart, nothing to escape: the common, fast path
    # An encrypted ledger keeps long strings inline, sealed with their row: a blob file in
    # artifacts/ would hold them in plaintext (docs/encryption.md).
    root = None if getattr(conn, "codec", None) is not None else _store_root(conn)
    spiller = _Spiller(conn, root, now)
    return canonical_json(_encode(json.loads(text), spiller))


def unchanged_by_spilling(text: str) -> bool:
    """Whether ``spill_text`` surely gives ``text`` back as it is (a false no is possible, never
    a false yes). ``text`` may also be a stretch of canonical JSON cut between whole tokens."""
    # "$" first: a one-character search runs at memchr speed (a plan without templates has
    # none), the marker's own does not (~0.3 ms of a 1,000-task plan's 0.6 MB).
    marked = "$" in text and _QUOTED_MARKER in text
    return not marked and not _may_hold_long_string(text)


def _may_hold_long_string(text: str) -> bool:
    """Whether JSON ``text`` may hold a string of ``SPILL_MIN_CHARS`` or more (never a false
    no), found at C speed: a large plan of short strings is not parsed and walked again.

    Escape pairs are masked first, so every quote left delimits a string; a string's escaped
    form is at least as long as the string. Then only windows of half that length are looked
    at: a stretch without a quote long enough to matter covers one whole window, and only a
    window without a quote is measured exactly. No list of the text's pieces is built (for a
    10,000-task plan it was ~50 MB of transient strings).
    """
    if len(text) < SPILL_MIN_CHARS:
        return False
    # Only a text with a backslash has escape pairs to mask: a one-character search runs at
    # memchr speed, a two-character one does not (~1 ms of a 1,000-task plan's 0.6 MB).
    masked = text.replace("\\\\", "__").replace('\\"', "__") if "\\" in text else text
    half = SPILL_MIN_CHARS // 2
    for start in range(0, len(masked), half):
        if masked.find('"', start, start + half) >= 0:
            continue
        opening = masked.rfind('"', 0, start)
        closing = masked.find('"', start + half)
        end = len(masked) if closing < 0 else closing
        if end - opening - 1 >= SPILL_MIN_CHARS:
            return True
    return False


class _Spiller:
    """Stores long strings of one value as blobs (each distinct content once)."""

    def __init__(self, conn: Db, root: Path | None, now: str) -> None:
        self.conn, self.root, self.now = conn, root, now
        self.done: dict[str, JsonValue] = {}

    def __call__(self, text: str) -> JsonValue:
        if self.root is None or len(text) < SPILL_MIN_CHARS:
            return text
        if text in self.done:
            return self.done[text]
        data = text.encode("utf-8")  # JSON text in a row is UTF-8 too: no new failure here
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        _write_blob(self.root, digest, data)
        pin_value_blob_txn(self.conn, digest, len(data), self.now)
        ref: JsonValue = {MARKER: digest, "bytes": len(data)}
        self.done[text] = ref
        return ref


def _encode(value: JsonValue, spill: _Spiller) -> JsonValue:
    if isinstance(value, str):
        return spill(value)
    if isinstance(value, list):
        return [_encode(v, spill) for v in value]
    if isinstance(value, dict):
        inner: JsonValue = {k: _encode(v, spill) for k, v in value.items()}
        return {MARKER: {_LITERAL: inner}} if MARKER in value else inner
    return value


def _write_blob(root: Path, digest: str, data: bytes) -> None:
    """Put ``data`` (whose digest is ``digest``) in the store, durably; a good copy is kept."""
    dest = blob_file(root, digest)
    tmp = dest.parent / f".{dest.name}.{uuid.uuid4().hex}.part"
    try:
        if blob_problem(dest, digest, len(data)) is None:
            return
        for folder in (root, root / "sha256", dest.parent):
            folder.mkdir(mode=0o700, exist_ok=True)
        with tmp.open("xb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), 0o400)
            os.fsync(fh.fileno())
        os.replace(tmp, dest)  # absent, or a damaged copy replaced by the good bytes
        fsync_dir(dest.parent)
    except OSError as exc:
        raise from_os_error(exc, f"artifact store {root}") from exc
    finally:
        tmp.unlink(missing_ok=True)


# --------------------------------------------------------------------------- reading


def loads_value(conn: Db, text: str | None) -> JsonValue:
    """A content column's value with every blob reference resolved (None for SQL NULL)."""
    value = loads_opt(text)  # corrupt JSON is a PersistenceError there, as in every column
    if text is None or _QUOTED_MARKER not in text:
        return value
    return _decode(value, _Reader(_store_root(conn)))


def resolve_text(conn: Db, text: str | None) -> str | None:
    """The canonical JSON text ``spill_text`` was given (None for SQL NULL)."""
    if text is None or _QUOTED_MARKER not in text:
        return text
    return canonical_json(loads_value(conn, text))


def loads_value_object(conn: Db, text: str | None) -> JsonObject:
    """A content column that always holds an object (an empty one for NULL)."""
    return as_object(loads_value(conn, text))


class _Reader:
    def __init__(self, root: Path | None) -> None:
        self.root = root

    def __call__(self, digest: str, size: int) -> str:
        if self.root is None:
            raise PersistenceError(f"ledger value {digest} is stored, but this ledger has no file")
        return _read_blob_text(self.root, digest, size)


def _decode(value: JsonValue, fetch: _Reader) -> JsonValue:
    if isinstance(value, list):
        return [_decode(v, fetch) for v in value]
    if not isinstance(value, dict):
        return value
    if MARKER in value:
        found, size = value[MARKER], value.get("bytes")
        if isinstance(found, str) and isinstance(size, int) and len(value) == 2:
            return fetch(found, size)
        literal = as_object(found).get(_LITERAL) if len(value) == 1 else None
        if isinstance(literal, dict) and len(as_object(found)) == 1:
            return {k: _decode(v, fetch) for k, v in literal.items()}
    return {k: _decode(v, fetch) for k, v in value.items()}


def _read_blob_text(root: Path, digest: str, size: int) -> str:
    """The text a value blob holds, checked against its recorded size and digest."""
    path = blob_file(root, digest)
    try:
        with path.open("rb") as fh:
            data = fh.read(size + 1)
    except FileNotFoundError as exc:
        raise PersistenceError(
            f"ledger value {digest} is missing from the artifact store {root}",
            data={"hint": _RESTORE_HINT},
        ) from exc
    except OSError as exc:
        raise from_os_error(exc, f"ledger value {digest} in {root}") from exc
    if len(data) != size or "sha256:" + hashlib.sha256(data).hexdigest() != digest:
        raise PersistenceError(
            f"ledger value {digest} in the artifact store {root} does not match its digest",
            data={"hint": _RESTORE_HINT},
        )
    return data.decode("utf-8")
