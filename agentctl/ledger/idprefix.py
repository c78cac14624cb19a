"""Finding a row by its whole id or a unique prefix of it: runs and approvals alike.

Invariants:
- a prefix names its id's kind and at least ``MIN_PREFIX_TAIL`` characters after it
  (``run-01a229``, ``approval-7e7f45``): shorter ones — an empty string from an unset shell
  variable, ``r`` — would pick whichever row happens to be alone in the ledger, and ``cancel``
  or ``approvals approve`` would then act on it; they match only a whole id;
- a whole id always wins over the ids it is a prefix of; no match is the kind's
  ``NotFoundError`` (exit 5), two or more an ambiguity (``ValidationError``, exit 2);
- the same SQL on every backend (``LIKE … ESCAPE``, with the prefix's wildcards escaped);
  hex keys (effect ids, artifact digests) are found by a range instead (``find_hex_prefix``).
"""

from __future__ import annotations

from dataclasses import dataclass

from agentctl.errors import NotFoundError, ValidationError
from agentctl.ledger.rows import fetch_all
from agentctl.ledger.sql import Db, Row

MIN_PREFIX_TAIL = 6


@dataclass(frozen=True)
class IdKind:
    """One kind of id that takes a prefix: its name (as ids start and messages say), its
    column as the ``select`` names it, the error a missing one raises, how a prefix's tail
    looks in the advice of that error."""

    name: str
    column: str
    missing: type[NotFoundError] = NotFoundError
    example: str = "01a229"  # a prefix's tail as this kind's ids start (runs: UUIDv7)


def find_row(conn: Db, ref: str, select: str, kind: IdKind) -> Row:
    """The row of ``select`` whose id is ``ref`` or uniquely starts with it."""
    _, dash, tail = ref.partition("-")
    if not dash or len(tail) < MIN_PREFIX_TAIL:
        rows = fetch_all(conn, f"{select} WHERE {kind.column} = ?", (ref,), kind.name)
        if rows:
            return rows[0]
        # Not found, whatever it would have matched as a prefix (exit 5, as for any unknown id).
        raise kind.missing(
            f"{kind.name} {ref!r} not found (a prefix names the id's kind and at least "
            f"{MIN_PREFIX_TAIL} characters after it, e.g. {kind.name}-{kind.example}…)"
        )
    escaped = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    rows = fetch_all(
        conn,
        f"{select} WHERE {kind.column} = ? OR {kind.column} LIKE ? ESCAPE '\\' LIMIT 3",
        (ref, escaped + "%"),
        kind.name,
    )
    exact = [r for r in rows if r[kind.column.rpartition(".")[2]] == ref]
    if exact:
        return exact[0]
    if not rows:
        raise kind.missing(f"{kind.name} {ref} not found")
    if len(rows) > 1:
        raise ValidationError(f"{kind.name} id prefix {ref!r} is ambiguous")
    return rows[0]


def find_hex_prefix(conn: Db, ref: str, table: str, column: str, kind: str) -> str:
    """The one ``column`` value of ``table`` that starts with ``ref`` (checked: hex after any
    fixed head, so no LIKE wildcard can appear); none is ``NotFoundError`` (exit 5), several
    an ambiguity (``ValidationError``, exit 2)."""
    rows = fetch_all(
        conn,
        # The range keeps the key's index usable on both backends ("g" sorts after any hex).
        f"SELECT {column}, format_version FROM {table}"
        f" WHERE {column} >= ? AND {column} < ? ORDER BY {column} LIMIT 2",
        (ref, ref + "g"),
        kind,
    )
    if not rows:
        raise NotFoundError(f"{kind} {ref} not found")
    if len(rows) > 1:
        raise ValidationError(f"{kind} prefix {ref!r} is ambiguous; give more of it")
    return str(rows[0][column])
