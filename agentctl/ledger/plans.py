"""A run's compiled plan as stored: in parts (``run_plan_parts``), or inline in its documents row.

Job: write and read back the compiled plan text a run was created with (``core.compiler.
stored``'s JSON, its long strings spilled by ``artifacts.values``) without handing SQLite the
whole plan as one value. SQLite builds a row twice while inserting it (the bound text and the
record), so a 6.5 MB plan of a 10,000-task run in one row cost ~20 MB of transient memory at
the peak of the run's creation (benchmarks/gaps.md, coordinator peak RSS); a part costs at most
``PART_CHARS`` characters of that.

Invariants:
- the stored text is the concatenation, in ``seq`` order, of the run's ``run_plan_parts`` rows;
  ``run_documents.plan_parts`` counts them and is written with them in the run's creation
  transaction. NULL there: the plan is the ``compiled_plan_json`` column (runs created before
  schema v15, and every run of an encrypted ledger) or absent (runs before schema v4);
- the text is spilled whole before it is cut, so reading joins the parts and resolves the
  blob references of the joined text: exactly what ``spill_text`` was given comes back;
- an encrypted ledger stores the plan inline: the seal triggers of a ledger encrypted before
  schema v15 do not cover ``run_plan_parts``;
- a part missing (fewer rows than ``plan_parts``) is a ``PersistenceError``, never a shorter
  plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentctl.errors import PersistenceError
from agentctl.ledger.artifacts.values import resolve_text, spill_text
from agentctl.ledger.sql import Db

# Characters per part: big enough that a 10,000-task plan is a few dozen rows, small enough
# that SQLite's copies of one stay well under a MB.
PART_CHARS = 1 << 18


@dataclass(frozen=True)
class StoredPlan:
    """How one run's compiled plan is written: ``inline`` for ``compiled_plan_json``, or
    ``parts`` rows cut from ``text``."""

    inline: str | None
    parts: int | None
    text: str | None


def stored_plan(conn: Db, text: str | None, now: str) -> StoredPlan:
    """Decide where ``text`` (None: no compiled plan) goes; spills its long strings."""
    if text is None:
        return StoredPlan(None, None, None)
    spilled = spill_text(conn, text, now)
    if getattr(conn, "codec", None) is not None:  # encrypted: sealed inline with its row
        return StoredPlan(spilled, None, None)
    return StoredPlan(None, max(1, -(-len(spilled) // PART_CHARS)), spilled)


def write_parts_txn(conn: Db, run_id: str, plan: StoredPlan) -> None:
    """The ``run_plan_parts`` rows of ``plan`` (nothing when it is stored inline)."""
    text = plan.text
    if text is None or plan.parts is None:
        return
    for seq in range(plan.parts):
        start = seq * PART_CHARS
        conn.execute(
            "INSERT INTO run_plan_parts (run_id, seq, plan_text) VALUES (?, ?, ?)",
            (run_id, seq, text[start : start + PART_CHARS]),
        )


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
