"""The per-run budget ledger: limits, usage, active reservations, and the exceeded record.

Dimensions are the camelCase counter names (``providerRequests``, ``turns``, ``toolCalls``,
``inputTokens``, ``outputTokens``, ``totalTokens``, ``processOutputBytes``, ``artifactBytes``,
``costMicrousd``, …); limits may carry the DSL's ``max`` prefix (``maxToolCalls``). Wall
time is not reserved: it derives from ``runs.created_at`` (``runs.wall_time_exceeded``).

Invariants:
- reserve and settle run inside the caller's ``BEGIN IMMEDIATE`` transaction, so the
  read-check-write of one run's ledger is serialised across processes: for every limited
  dimension, usage + active reservations never exceeds the limit through a reservation
  (equality allowed); only a settled actual above its reservation can overshoot;
- a reservation id is used once: reserving it again is a no-op, settling it again too;
- once ``exceeded`` is recorded every further reservation is denied;
- dimensions are checked in ``CHECK_FIRST`` order, so the one named is the request count
  before any token or cost dimension;
- the counters are decided from what the row holds inside that transaction: either read
  there, or remembered from this process's last write and confirmed by the write itself (a
  compare-and-set on the counter columns and ``exceeded_json IS NULL``); a remembered row
  that does not match is read afresh, never trusted;
- at most one counters write per reserve or settle; a settle given a ``SettleLater`` (the
  pipelined step transaction) writes none itself: the next reserve of the run in that
  transaction writes both (one compare-and-set), else ``write_settled_txn`` before the
  transaction's end. A settle that overshoots, or finds no remembered row, writes at once;
- a refused reservation leaves no row; a settled one is ``reconciled`` with its actual usage.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import NamedTuple

from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.errors import NotFoundError, RunFailedError
from agentctl.ledger.audit import (
    AuditBuffer,
    append_audit_txn,
    flush_audits_txn,
    write_checkpoint_txn,
)
from agentctl.ledger.budget_known import (
    REMEMBERED,
    Known,
    held_amounts,
    read_known,
    write_counters,
)
from agentctl.ledger.rows import ROW_FORMAT_VERSION, dumps, fetch_one, loads_counts, loads_object
from agentctl.ledger.sql import Db

# Limits the compiler checks against the plan; the run never consumes them.
STRUCTURAL = frozenset({"tasks", "expansionItems", "loopIterations"})
WALL_TIME = "wallTimeSeconds"
# A model call is refused for its request count before its tokens and cost (issue 14 item 8):
# a run over its request limit names ``providerRequests``, whatever the call would have used.
CHECK_FIRST = (
    "providerRequests",
    "turns",
    "toolCalls",
    "inputTokens",
    "outputTokens",
    "totalTokens",
    "costMicrousd",
)


class BudgetRefusedError(RunFailedError):
    """A reservation was refused; ``exceeded`` is the recorded ``{dimension, limit, attempted}``."""

    def __init__(self, exceeded: JsonObject) -> None:
        dim, limit = exceeded.get("dimension"), exceeded.get("limit")
        super().__init__(f"budget {dim} exceeded (limit {limit}); nothing more was stored")
        self.exceeded = exceeded


@dataclass(frozen=True)
class ReservationOutcome:
    """Whether a budget reservation was granted, and which limit it would exceed."""

    granted: bool
    reservation_id: str
    exceeded: JsonObject | None = None
    already_recorded: bool = False


@dataclass(frozen=True)
class BudgetSnapshot:
    """A run's budget: its limits, what is used and what is reserved."""

    run_id: str
    limits: dict[str, int]
    usage: dict[str, int]
    reserved: dict[str, int]
    exceeded: JsonObject | None
    updated_at: str

    def metered(self, wall_seconds: int, planned: Mapping[str, int]) -> dict[str, int]:
        """Usage of every limited dimension (0 when unused), wall time and planned counts."""
        usage = dict(self.usage)
        for dim in self.limits:
            if dim == WALL_TIME:
                usage[dim] = wall_seconds
            elif dim in STRUCTURAL:
                usage[dim] = planned.get(dim, 0)
            else:
                usage.setdefault(dim, 0)
        return usage

    def to_json(self) -> JsonObject:
        return {
            "runId": self.run_id,
            "limits": dict[str, JsonValue](self.limits),
            "usage": dict[str, JsonValue](self.usage),
            "reserved": dict[str, JsonValue](self.reserved),
            "exceeded": self.exceeded,
            "updatedAt": self.updated_at,
        }


def normalise_dimension(name: str) -> str:
    """``maxToolCalls`` → ``toolCalls``; counter names pass through."""
    if name.startswith("max") and len(name) > 3 and name[3].isupper():
        return name[3].lower() + name[4:]
    return name


def _amounts(values: Mapping[str, int]) -> dict[str, int]:
    """Normalised amounts; ``totalTokens`` derived from input + output when not given."""
    out = {normalise_dimension(k): int(v) for k, v in values.items()}
    if "totalTokens" not in out and ("inputTokens" in out or "outputTokens" in out):
        out["totalTokens"] = out.get("inputTokens", 0) + out.get("outputTokens", 0)
    return out


def _add(base: dict[str, int], delta: Mapping[str, int], sign: int = 1) -> dict[str, int]:
    out = dict(base)
    for key, value in delta.items():
        out[key] = out.get(key, 0) + sign * value
    return out


def init_budget_txn(conn: Db, run_id: str, limits: Mapping[str, int], now: str) -> None:
    conn.execute(
        "INSERT INTO run_budgets (run_id, format_version, limits_json, updated_at)"
        " VALUES (?, ?, ?, ?)",
        (
            run_id,
            ROW_FORMAT_VERSION,
            dumps({normalise_dimension(k): int(v) for k, v in limits.items()}),
            now,
        ),
    )


def budget_snapshot(conn: Db, run_id: str) -> BudgetSnapshot:
    row = fetch_one(conn, "SELECT * FROM run_budgets WHERE run_id = ?", (run_id,), "budget")
    return BudgetSnapshot(
        run_id=run_id,
        limits=loads_counts(row["limits_json"]),
        usage=loads_counts(row["usage_json"]),
        reserved=loads_counts(row["reserved_json"]),
        exceeded=None if row["exceeded_json"] is None else loads_object(row["exceeded_json"]),
        updated_at=row["updated_at"],
    )


_FIRST = {dim: i for i, dim in enumerate(CHECK_FIRST)}


def _check_key(dim: str) -> tuple[int, str]:
    return (_FIRST.get(dim, len(_FIRST)), dim)


def checked_order(dimensions: Iterable[str]) -> list[str]:
    """Dimensions in the order they are checked: ``CHECK_FIRST``, then by name."""
    return sorted(dimensions, key=_check_key)


def _first_overrun(
    limits: Mapping[str, int],
    usage: Mapping[str, int],
    reserved: Mapping[str, int],
    extra: Mapping[str, int],
) -> JsonObject | None:
    for dim in checked_order(extra):
        limit = limits.get(dim)
        if limit is None:
            continue
        attempted = usage.get(dim, 0) + reserved.get(dim, 0) + extra[dim]
        if attempted > limit:
            return {"dimension": dim, "limit": limit, "attempted": attempted}
    return None


def record_exceeded_txn(
    conn: Db,
    run_id: str,
    exceeded: JsonObject,
    now: str,
    trace_id: str | None,
    task_id: str | None = None,
) -> None:
    conn.execute(  # audited under ``task_id`` when a task's dispatch was refused
        "UPDATE run_budgets SET exceeded_json = ?, updated_at = ? WHERE run_id = ?",
        (dumps(exceeded), now, run_id),
    )
    append_audit_txn(
        conn, run_id, "budget.exceeded", exceeded, now, task_id=task_id, trace_id=trace_id
    )
    write_checkpoint_txn(
        conn, run_id, {"runId": run_id, "event": "budget.exceeded", **exceeded}, now
    )


def _overshoot(limits: Mapping[str, int], usage: Mapping[str, int]) -> JsonObject | None:
    """The first limited dimension whose settled usage went over its limit."""
    for dim in checked_order(limits):
        if usage.get(dim, 0) > limits[dim]:
            return {"dimension": dim, "limit": limits[dim], "attempted": usage[dim]}
    return None


def _settled(
    known: Known, held: dict[str, int], spent: dict[str, int]
) -> tuple[dict[str, int], dict[str, int]]:
    """``known``'s usage and reserved counters once ``held`` is replaced by ``spent``."""
    return _add(known.usage, spent), _add(known.reserved, held, -1)


class _Settled(NamedTuple):
    """A deferred settlement: the row it applies to, what was held and spent, the result;
    ``before``: the caller's pending events and how many of them came before the settle
    (written ahead of an overshoot it ends up recording, as a settle writing at once does)."""

    base: Known
    held: dict[str, int]
    spent: dict[str, int]
    usage: dict[str, int]
    reserved: dict[str, int]
    trace_id: str | None
    before: tuple[AuditBuffer | None, int] = (None, 0)


@dataclass
class SettleLater:
    """One transaction's settled counters not yet written (one settlement at most). The next
    reserve of the run writes them with its own in one UPDATE; ``write_settled_txn`` writes
    what is left before the transaction ends (a rollback drops them with it).

    Known limit: when another process changed the run's row since this one remembered it and
    the settlement, applied afresh, overshoots, its ``budget.exceeded`` goes after the events
    the caller's buffer wrote in between (a task's completion, the next task's start), not
    right after the effect's own event as a settle writing at once puts it. The counters and
    the refusal are the same; only that event's place in the audit log differs."""

    pending: _Settled | None = None

    def defer(
        self,
        run_id: str,
        held: dict[str, int],
        spent: dict[str, int],
        trace_id: str | None,
        buffer: AuditBuffer | None = None,
    ) -> bool:
        """Apply a settlement without writing; False (nothing applied) when one is deferred
        already, there is no remembered row to apply it to, or it would overshoot a limit.

        One at most: a stale remembered row is found out only when the deferred counters are
        written, and the row read afresh then gets them all at once — with two, an overshoot
        by the first would be recorded after the second, with both in its ``attempted``."""
        known = REMEMBERED.get(run_id)
        if self.pending is not None or known is None:
            return False
        usage, reserved = _settled(known, held, spent)
        if _overshoot(known.limits, usage) is not None:
            return False
        before = (buffer, buffer.mark() if buffer is not None else 0)
        self.pending = _Settled(known, held, spent, usage, reserved, trace_id, before)
        return True

    def take(self, run_id: str | None = None) -> _Settled | None:
        """What is pending (for ``run_id`` when given), forgotten here."""
        was = self.pending
        if was is None or (run_id is not None and was.base.run_id != run_id):
            return None
        self.pending = None
        return was


def write_settled_txn(conn: Db, later: SettleLater | None, now: str) -> None:
    """Write the deferred settlement: a compare-and-set over the row it was applied to;
    a miss reads the row afresh, applies it again and records an overshoot (as a settle
    writing at once would have, before the events still in the caller's buffer)."""
    was = None if later is None else later.take()
    if was is None:
        return
    if not write_counters(conn, was.base, was.usage, was.reserved, now, cas=True):
        _settle_afresh_txn(conn, was, now)


def _settle_afresh_txn(conn: Db, was: _Settled, now: str) -> None:
    """A deferred settlement whose remembered row was stale: applied to the row read afresh,
    an overshoot recorded (as a settle writing at once would have)."""
    run_id = was.base.run_id
    known, exceeded = read_known(conn, run_id)
    usage, reserved = _settled(known, was.held, was.spent)
    write_counters(conn, known, usage, reserved, now, cas=False, remember=exceeded is None)
    over = _overshoot(known.limits, usage)
    if over is not None and exceeded is None:
        REMEMBERED.pop(run_id, None)
        buffer, mark = was.before
        if buffer is not None:
            buffer.flush_through_txn(conn, run_id, now, mark)
        record_exceeded_txn(conn, run_id, over, now, was.trace_id)


def _reserve_with_settled(
    conn: Db, later: SettleLater | None, run_id: str, wanted: dict[str, int], now: str
) -> bool:
    """Write this transaction's deferred settlements and the reservation in one UPDATE; False
    (the settlements written alone, the reservation not) when that cannot be done."""
    was = None if later is None else later.take(run_id)
    if was is None:
        return False
    if _first_overrun(was.base.limits, was.usage, was.reserved, wanted) is not None:
        write_settled_txn(conn, SettleLater(was), now)  # the settlement alone may still fit
    elif not write_counters(conn, was.base, was.usage, _add(was.reserved, wanted), now, cas=True):
        _settle_afresh_txn(conn, was, now)  # the same compare-and-set again would miss too
    else:
        return True
    return False


def _reserve_counters(conn: Db, run_id: str, wanted: dict[str, int], now: str) -> JsonObject | None:
    """Add ``wanted`` to the reserved counters, or return the overrun (nothing written)."""
    known = REMEMBERED.get(run_id)
    if known is not None and not _first_overrun(known.limits, known.usage, known.reserved, wanted):
        reserved = _add(known.reserved, wanted)
        if write_counters(conn, known, known.usage, reserved, now, cas=True):
            return None
    known, recorded = read_known(conn, run_id)
    # Named: what it would reach (spec/cli.md §7), or the record that exceeded the budget.
    exceeded = _first_overrun(known.limits, known.usage, known.reserved, wanted) or recorded
    if exceeded is None:
        write_counters(conn, known, known.usage, _add(known.reserved, wanted), now, cas=False)
    else:
        REMEMBERED.pop(run_id, None)
    return exceeded


def _insert_reservation_txn(
    conn: Db, run_id: str, reservation_id: str, wanted: dict[str, int], now: str
) -> bool:
    """The reservation's row, active; False if it exists already (its key: a repeat)."""
    inserted = conn.execute(
        "INSERT INTO budget_reservations (run_id, reservation_id, format_version, amounts_json,"
        " status, created_at) VALUES (?, ?, ?, ?, 'active', ?)"
        " ON CONFLICT (run_id, reservation_id) DO NOTHING",
        (run_id, reservation_id, ROW_FORMAT_VERSION, dumps(wanted), now),
    )
    return bool(inserted.rowcount == 1)


def reserve_budget_txn(
    conn: Db,
    run_id: str,
    reservation_id: str,
    amounts: Mapping[str, int],
    now: str,
    *,
    trace_id: str | None = None,
    buffer: AuditBuffer | None = None,
    later: SettleLater | None = None,
    task_id: str | None = None,
) -> ReservationOutcome:
    """Reserve ``amounts`` before ``task_id``'s dispatch, or record the overrun and deny it.

    ``buffer``: the transaction's pending audit events; ``budget.reserved`` joins them (a
    refusal writes them first, then its own record). Two statements when granted: the
    reservation row (its key makes a repeat a no-op) and the counters' compare-and-set, which
    writes ``later``'s deferred settlements too.
    """
    wanted = _amounts(amounts)
    if not _insert_reservation_txn(conn, run_id, reservation_id, wanted, now):
        return ReservationOutcome(True, reservation_id, already_recorded=True)
    exceeded = None
    if not _reserve_with_settled(conn, later, run_id, wanted, now):
        exceeded = _reserve_counters(conn, run_id, wanted, now)
    if exceeded is not None:  # a refused reservation leaves no row
        conn.execute(
            "DELETE FROM budget_reservations WHERE run_id = ? AND reservation_id = ?",
            (run_id, reservation_id),
        )
        flush_audits_txn(conn, run_id, buffer, now)
        record_exceeded_txn(conn, run_id, exceeded, now, trace_id, task_id)
        return ReservationOutcome(False, reservation_id, exceeded=exceeded)
    payload = {"reservationId": reservation_id, "amounts": wanted}
    if buffer is None:
        append_audit_txn(
            conn, run_id, "budget.reserved", payload, now, task_id=task_id, trace_id=trace_id
        )
    else:
        buffer.add("budget.reserved", payload, task_id, trace_id)
    return ReservationOutcome(True, reservation_id)


def _settle_counters(
    conn: Db, run_id: str, held: dict[str, int], spent: dict[str, int], now: str
) -> BudgetSnapshot:
    """Move ``held`` out of reserved and ``spent`` into usage; the row as written."""
    known, exceeded = REMEMBERED.get(run_id), None
    if known is not None:
        usage, reserved = _settled(known, held, spent)
        if not write_counters(conn, known, usage, reserved, now, cas=True):
            known = None
    if known is None:
        known, exceeded = read_known(conn, run_id)
        usage, reserved = _settled(known, held, spent)
        write_counters(conn, known, usage, reserved, now, cas=False, remember=exceeded is None)
    return BudgetSnapshot(run_id, known.limits, usage, reserved, exceeded, now)


def _settled_before(conn: Db, run_id: str, reservation_id: str) -> BudgetSnapshot:
    """The budget as it is, for a reservation settled before; NotFoundError if unknown."""
    seen = conn.execute(
        "SELECT status FROM budget_reservations WHERE run_id = ? AND reservation_id = ?",
        (run_id, reservation_id),
    ).fetchone()
    if seen is None:
        raise NotFoundError(f"budget reservation {reservation_id} of run {run_id} not found")
    return budget_snapshot(conn, run_id)


def _reconcile_txn(
    conn: Db,
    run_id: str,
    reservation_id: str,
    spent: dict[str, int],
    now: str,
    held: Mapping[str, int] | None,
) -> dict[str, int] | None:
    """Mark an active reservation reconciled; what it held, or None when none was active.
    With ``held`` known no ``RETURNING`` (SQLite builds a temporary table for the row)."""
    args = (dumps(spent), now, run_id, reservation_id)
    if held is not None:
        done = conn.execute(_RECONCILE, args)
        return _amounts(held) if done.rowcount == 1 else None
    row = conn.execute(_RECONCILE_RETURNING, args).fetchone()
    return None if row is None else held_amounts(row[0])


_RECONCILE = (
    "UPDATE budget_reservations SET status = 'reconciled', actual_json = ?, settled_at = ?"
    " WHERE run_id = ? AND reservation_id = ? AND status = 'active'"
)
_RECONCILE_RETURNING = _RECONCILE + " RETURNING amounts_json"


def settle_budget_txn(
    conn: Db,
    run_id: str,
    reservation_id: str,
    actual: Mapping[str, int],
    now: str,
    *,
    trace_id: str | None = None,
    later: SettleLater | None = None,
    buffer: AuditBuffer | None = None,
    held: Mapping[str, int] | None = None,
    task_id: str | None = None,
) -> BudgetSnapshot:
    """Replace a reservation by the actual usage; an overshoot records ``exceeded``. With
    ``later`` the counters are left to the transaction's next reserve or its end.
    ``buffer``: the transaction's pending events, written before anything this settle audits
    (a deferred settle audits nothing: they stay for the transaction's one write).
    ``held``: the amounts the caller reserved under this id, when it knows them (else they
    are read back from the row). ``task_id``: the task whose effect or file the reservation
    was for, the overshoot's audit event is filed under it."""
    spent = _amounts(actual)
    reserved = _reconcile_txn(conn, run_id, reservation_id, spent, now, held)
    if (
        later is not None
        and reserved is not None
        and later.defer(run_id, reserved, spent, trace_id, buffer)
    ):
        was = later.pending
        assert was is not None  # just deferred
        return BudgetSnapshot(run_id, was.base.limits, was.usage, was.reserved, None, now)
    write_settled_txn(conn, later, now)  # first: its overshoot goes before the later events
    flush_audits_txn(conn, run_id, buffer, now)
    if reserved is None:  # unknown, or settled before: a repeat changes nothing
        return _settled_before(conn, run_id, reservation_id)
    snap = _settle_counters(conn, run_id, reserved, spent, now)
    over = _overshoot(snap.limits, snap.usage)
    if over is None or snap.exceeded is not None:
        # What was just written, not read back (each worker effect reserves its output).
        return snap
    REMEMBERED.pop(run_id, None)
    record_exceeded_txn(conn, run_id, over, now, trace_id, task_id)
    return replace(snap, exceeded=over)
