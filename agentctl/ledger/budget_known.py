"""The budget row as this process last wrote it, and the writes of its counters.

The process driving a run reserves and settles its budget on every worker effect; reading
the row back and decoding its three JSON counters each time was most of that work. So the
row as last written here is remembered per run, and a write through it is a compare-and-set
on the very column texts it was computed from (and no ``exceeded``), inside the caller's
locked transaction: another process's write, a rolled-back transaction or another database
with the same run id only makes it miss, and a miss reads the row afresh.

Invariants: a remembered row is a guess, never trusted without its compare-and-set; a row
with ``exceeded`` is never remembered; the counters handed out are read, never changed.
"""

from __future__ import annotations

from typing import NamedTuple

from agentctl.core.jsonvalue import JsonObject
from agentctl.ledger.rows import dumps, fetch_one, loads_counts, loads_object
from agentctl.ledger.sql import Db


class Known(NamedTuple):
    """The budget row as this process last read or wrote it: its counter columns' text (the
    compare-and-set's expected values) and what they decode to."""

    run_id: str
    limits_text: str
    usage_text: str
    reserved_text: str
    limits: dict[str, int]
    usage: dict[str, int]
    reserved: dict[str, int]


# run id → its row as last written here (see the module doc).
REMEMBERED: dict[str, Known] = {}
_MAX_ENTRIES = 256  # per table: a process drives a few runs at a time

_CAS_COUNTERS = (
    "UPDATE run_budgets SET usage_json = ?, reserved_json = ?, updated_at = ? WHERE run_id = ?"
    " AND limits_json = ? AND usage_json = ? AND reserved_json = ? AND exceeded_json IS NULL"
)
_SET_COUNTERS = (
    "UPDATE run_budgets SET usage_json = ?, reserved_json = ?, updated_at = ? WHERE run_id = ?"
)


def read_known(conn: Db, run_id: str) -> tuple[Known, JsonObject | None]:
    """The row read afresh, with its ``exceeded`` record."""
    row = fetch_one(conn, "SELECT * FROM run_budgets WHERE run_id = ?", (run_id,), "budget")
    exceeded = None if row["exceeded_json"] is None else loads_object(row["exceeded_json"])
    limits, usage, reserved = row["limits_json"], row["usage_json"], row["reserved_json"]
    counts = (loads_counts(limits), loads_counts(usage), loads_counts(reserved))
    return Known(run_id, limits, usage, reserved, *counts), exceeded


def write_counters(
    conn: Db,
    known: Known,
    usage: dict[str, int],
    reserved: dict[str, int],
    now: str,
    *,
    cas: bool,
    remember: bool = True,
) -> bool:
    """Write new usage and reserved counters over ``known``: with ``cas`` only if the row still
    holds ``known`` and no ``exceeded`` (a compare-and-set), else unconditionally (the row was
    just read in this transaction). Remembers what it wrote unless told not to (a row with
    ``exceeded``: every reservation is refused now); False: nothing was written."""
    run_id = known.run_id
    usage_text = known.usage_text if usage is known.usage else dumps(usage)
    reserved_text = dumps(reserved)
    values: tuple[str, ...] = (usage_text, reserved_text, now, run_id)
    if cas:
        values += (known.limits_text, known.usage_text, known.reserved_text)
    written = conn.execute(_CAS_COUNTERS if cas else _SET_COUNTERS, values).rowcount == 1
    if not written or not remember:
        REMEMBERED.pop(run_id, None)
        return written
    if len(REMEMBERED) >= _MAX_ENTRIES and run_id not in REMEMBERED:
        REMEMBERED.clear()
    REMEMBERED[run_id] = Known(
        run_id, known.limits_text, usage_text, reserved_text, known.limits, usage, reserved
    )
    return True


# Reservation amounts' text → counters: a pure memo (each shell effect reserves the same
# ``{"processOutputBytes": …}``), so settling decodes no JSON; the counters are only read.
_HELD: dict[str, dict[str, int]] = {}


def held_amounts(text: str) -> dict[str, int]:
    held = _HELD.get(text)
    if held is None:
        if len(_HELD) >= _MAX_ENTRIES:
            _HELD.clear()
        held = _HELD[text] = loads_counts(text)
    return held
