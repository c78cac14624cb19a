"""Shared helpers for ledger rows: IDs, JSON columns, row format checks, timestamps.

Invariants:
- JSON columns hold canonical JSON (sorted keys, compact), so equal values store equal text;
- every row read back passes :func:`check_format`: a ``format_version`` above what this build
  writes raises ``FutureVersionError`` naming both versions, before the row is interpreted;
- a JSON column that does not parse is corrupt state (``PersistenceError``, exit 5), never a
  foreign ``JSONDecodeError`` escaping as an internal error;
- timestamps are RFC 3339 UTC strings with milliseconds (``2024-05-01T12:00:00.000Z``),
  supplied by the caller's injected clock; only this module parses them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import NewType

from agentctl.core.canonical import canonical_json
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_object
from agentctl.errors import FutureVersionError, NotFoundError, PersistenceError
from agentctl.ledger.sql import Db, Row, SqlParam

RunId = NewType("RunId", str)
TaskId = NewType("TaskId", str)
EffectId = NewType("EffectId", str)
ApprovalId = NewType("ApprovalId", str)
ReconciliationId = NewType("ReconciliationId", str)

# The row format this build writes, per table; reading a newer one is refused.
ROW_FORMAT_VERSION = 1


def dumps(value: object) -> str:
    """Canonical JSON text of anything ``json`` can encode (mappings, sequences, scalars)."""
    return canonical_json(value)


def dumps_opt(value: object) -> str | None:
    return None if value is None else canonical_json(value)


# The C scanner ``json.loads`` ends in (default options; typeshed leaves it out).
_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def loads_opt(text: str | None) -> JsonValue:
    """A JSON column's value (None for SQL NULL).

    What we wrote is canonical JSON, one value with nothing around it: read by the C scanner
    alone, without ``json.loads``' Python layers (~1.5 us a value; a run's outputs are read
    back whole). Anything else — space around it, a text that does not scan whole, or does
    not scan — is ``json.loads``', with its result or its error."""
    if text is None:
        return None
    try:
        scanned, end = _SCAN(text, 0)
        if end == len(text):
            return scanned  # type: ignore[no-any-return]
    except (ValueError, StopIteration):
        pass
    try:
        value: JsonValue = json.loads(text)
    except ValueError as exc:  # JSONDecodeError; also a number too long to convert
        # Only what we wrote is here (canonical JSON): anything else was damaged or edited.
        raise PersistenceError(
            f"corrupt state: a stored JSON value does not parse ({exc}); "
            "restore the database from a backup"
        ) from exc
    return value


def loads_object(text: str | None) -> JsonObject:
    """A JSON column that always holds an object (an empty one for NULL)."""
    return as_object(loads_opt(text))


def loads_counts(text: str | None) -> dict[str, int]:
    """A JSON column holding ``{dimension: integer}`` counters."""
    return {k: int(v) for k, v in loads_object(text).items() if isinstance(v, int | float)}


def check_format(row: Row, kind: str) -> Row:
    """Refuse a row written by a newer agentctl (its format we cannot interpret)."""
    found = int(row["format_version"])
    if found > ROW_FORMAT_VERSION:
        raise FutureVersionError(
            f"{kind} row format {found} is newer than supported {ROW_FORMAT_VERSION}"
        )
    return row


def checked_name(value: object, allowed: frozenset[str], what: str) -> str:
    """A stored enumerated value (a run's state or mode, a task's state), refused unless it
    is one this build knows: a ``weird`` state was edited in or written by something else,
    and acting on it (resuming, cancelling, listing it as a state) would guess."""
    if value in allowed:
        return str(value)
    raise PersistenceError(
        f"corrupt state: {what} {value!r} is not one of {', '.join(sorted(allowed))}; "
        "restore the database from a backup"
    )


def fetch_one(conn: Db, sql: str, params: tuple[SqlParam, ...], kind: str) -> Row:
    """The single row ``sql`` selects, format-checked; ``NotFoundError`` if there is none."""
    row = conn.execute(sql, params).fetchone()
    if row is None:
        raise NotFoundError(f"{kind} {params[0]} not found")
    return check_format(row, kind)


def fetch_all(conn: Db, sql: str, params: tuple[SqlParam, ...], kind: str) -> list[Row]:
    return [check_format(row, kind) for row in conn.execute(sql, params)]


def parse_ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def format_ts(moment: datetime) -> str:
    return (
        moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    )


def shift_ts(text: str, seconds: float) -> str:
    """``text`` moved by ``seconds`` (negative goes back), in the same format."""
    return format_ts(parse_ts(text) + timedelta(seconds=seconds))
