"""A run's compiled plan as stored: in parts (``run_plan_parts``), or inline in its documents row.

Job: write and read back the compiled plan text a run was created with (``core.compiler.
stored``'s JSON, its long strings spilled by ``artifacts.values``) without the whole plan as
one value. SQLite builds a row twice while inserting it (the bound text and the record), so
a 6.5 MB plan of a 10,000-task run in one row cost ~20 MB of transient memory at the peak of
the run's creation, and the text itself 6.5 MB more (benchmarks/gaps.md, coordinator peak
RSS). A plan given as ``PlanText`` pieces is written part by part as they are made.

Trade-off: the pieces are encoded inside the run's creation transaction, so the write lock is
held while the plan is encoded (~0.1 s of CPU at 10,000 tasks, twice that for a plan that
turns out to hold a string to spill); other writers of the same ledger wait that long, once,
when a large run is created.

Invariants:
- the stored text is the concatenation, in ``seq`` order, of the run's ``run_plan_parts`` rows
  (each at most ``PART_CHARS`` characters); ``run_documents.plan_parts`` counts them, written
  in the same creation transaction. NULL there: the plan is the ``compiled_plan_json`` column
  (runs created before schema v15, plans holding a spilled string, and every run of an
  encrypted ledger) or absent (runs before schema v4);
- what is stored is exactly ``spill_text`` of the whole text: text is cut into parts as it
  is, unparsed, only while no stretch of it may hold a string to spill or the ``$artifact``
  marker (checked on whole JSON tokens, so never a false no); a plan that may is stored
  inline through ``spill_text`` instead (its parts so far deleted), so a blob reference is
  never cut in two — ``agentctl gc`` keeps a blob while some text column names its digest;
- an encrypted ledger stores the plan inline: the seal triggers of a ledger encrypted before
  schema v15 do not cover ``run_plan_parts``;
- a part missing (fewer rows than ``plan_parts``) is a ``PersistenceError``, never a shorter
  plan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from agentctl.errors import PersistenceError
from agentctl.ledger.artifacts.values import resolve_text, spill_text, unchanged_by_spilling
from agentctl.ledger.sql import Db

# Characters per part: big enough that a 10,000-task plan is a few dozen rows, small enough
# that SQLite's copies of one stay well under a MB.
PART_CHARS = 1 << 18


@dataclass(frozen=True)
class PlanText:
    """A compiled plan's JSON text as pieces, each a run of whole JSON tokens (a string never
    spans two), made afresh by every call of ``pieces`` (a retried write starts over)."""

    pieces: Callable[[], Iterable[str]]

    def text(self) -> str:
        return "".join(self.pieces())


class _MaySpill(Exception):
    """A stretch of the plan may hold a string to store apart: the raw parts are not it."""


def write_plan_txn(
    conn: Db, run_id: str, plan: str | PlanText | None, now: str
) -> tuple[str | None, int | None]:
    """Store ``plan``'s parts (the run row exists); returns the documents row's
    ``(compiled_plan_json, plan_parts)``."""
    if plan is None:
        return None, None
    if getattr(conn, "codec", None) is not None:  # encrypted: sealed inline with its row
        return spill_text(conn, plan if isinstance(plan, str) else plan.text(), now), None
    pieces = PlanText(lambda: (plan,)) if isinstance(plan, str) else plan
    try:
        return None, _insert_parts(conn, run_id, _clean_parts(pieces.pieces()))
    except _MaySpill:
        conn.execute("DELETE FROM run_plan_parts WHERE run_id = ?", (run_id,))
    # Inline: a blob reference cut in two would hide its digest from ``agentctl gc``.
    return spill_text(conn, pieces.text(), now), None


def _insert_parts(conn: Db, run_id: str, parts: Iterator[str]) -> int:
    count = 0
    for count, part in enumerate(parts, 1):
        conn.execute(
            "INSERT INTO run_plan_parts (run_id, seq, plan_text) VALUES (?, ?, ?)",
            (run_id, count - 1, part),
        )
    return count


def _clean_parts(pieces: Iterable[str]) -> Iterator[str]:
    """``_cut(pieces)``, each stretch checked first: ``_MaySpill`` if spilling might change it."""
    return _cut(_checked(_stretches(pieces)))


def _checked(stretches: Iterable[str]) -> Iterator[str]:
    for stretch in stretches:
        if not unchanged_by_spilling(stretch):
            raise _MaySpill
        yield stretch


def _stretches(pieces: Iterable[str]) -> Iterator[str]:
    """The pieces joined in stretches of at least ``PART_CHARS`` (the last one shorter)."""
    buffer: list[str] = []
    size = 0
    for piece in pieces:
        buffer.append(piece)
        size += len(piece)
        if size >= PART_CHARS:
            yield "".join(buffer)
            buffer, size = [], 0
    if buffer:
        yield "".join(buffer)


def _cut(texts: Iterable[str]) -> Iterator[str]:
    """``texts`` joined and cut in parts of ``PART_CHARS`` characters (the last one shorter)."""
    rest = ""
    for text in texts:
        rest += text
        whole = len(rest) - len(rest) % PART_CHARS
        for start in range(0, whole, PART_CHARS):
            yield rest[start : start + PART_CHARS]
        rest = rest[whole:]
    if rest:
        yield rest


def read_plan_text(conn: Db, run_id: str, inline: str | None, parts: int | None) -> str | None:
    """The compiled plan text of a run whose documents row holds ``inline`` and ``parts``."""
    if parts is None:
        return resolve_text(conn, inline)
    rows = conn.execute(
        "SELECT plan_text FROM run_plan_parts WHERE run_id = ? ORDER BY seq", (run_id,)
    ).fetchall()
    if len(rows) != parts:
        raise PersistenceError(
            f"run {run_id}'s stored plan has {len(rows)} of its {parts} parts; "
            "restore the database from a backup"
        )
    return resolve_text(conn, "".join(str(r[0]) for r in rows))
