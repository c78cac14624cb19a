"""The run queue: submitted runs, ``serve`` claims with expiring leases, heartbeats, fencing.

Invariants:
- a submitted run is created ``queued`` with ``queued_at`` and no lease; only a ``serve``
  claims it (``run``/``resume`` never look at the queue);
- a claim is one transaction: it picks claimable runs (below) with ``FOR UPDATE SKIP LOCKED``
  on PostgreSQL (SQLite's single writer serialises claims the same way), raises each one's
  fencing token, gives its lease an expiry, moves a queued run to ``running``, turns its
  ``started`` effects ``uncertain`` and parks their tasks (``ledger.lost``: a takeover follows
  the ordinary resume rules, nothing is silently repeated) and audits ``run.claimed`` with the
  holder and the token — every event a claim writes names the trace of the drive that claims
  the run (``ClaimRequest.trace_ids``);
- claimable: a queued run no process holds; a submitted run whose ``serve`` lease expired
  (always claimed, if only to fence its old holder out); a submitted running or paused run
  whose lease was released, once no approval of it is pending and no effect of it awaits
  reconciliation;
- a run taken over with its cancel flag set (its holder died before honouring it) is
  cancelled in the claim's transaction, before anything of it starts (its lost effects
  uncertain first, as ``cancel`` ends a run nothing drives);
- a claimed run that an unreconciled effect blocks is handed back in the same transaction
  (lease released, token raised, ``run.blocked`` audited): it waits for ``effects reconcile``;
- every claim is returned, the ones not to drive with why (``ClaimedRun.ended``), so the
  ``serve`` that made it can report it;
- a heartbeat extends exactly the leases still under the ``serve``'s tokens; the others are
  reported lost, and their drives stop;
- ``check_fence`` is the one check a fenced ledger's every write transaction makes first: the
  run's token must still be the one its claim got, else nothing of the transaction commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import agentctl.ledger.leases as leases
import agentctl.ledger.lifecycle as lifecycle
import agentctl.ledger.runs as runs
from agentctl.errors import LeaseLostError
from agentctl.ledger.audit import append_audit_txn
from agentctl.ledger.lost import judge_lost_txn
from agentctl.ledger.model import Owner
from agentctl.ledger.sql import Db, dialect_of


@dataclass(frozen=True)
class Fence:
    """A ``serve``'s claim on one run: every write for the run checks this token."""

    run_id: str
    token: int


@dataclass(frozen=True)
class ClaimRequest:
    """Claim up to ``limit`` runs for ``holder`` (a ``serve``: host and pid) until ``expires``.

    ``trace_ids``: the traces of the drives the claimed runs get, in claim order (the n-th run
    looked at takes the n-th; none left: its events carry no trace)."""

    holder: str
    owner: Owner
    limit: int
    expires_at: str
    now: str
    trace_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClaimedRun:
    """A run this server claimed, and its fencing token; held until its drive ends, unless
    the claim itself ended it (``ended``)."""

    run_id: str
    token: int
    takeover: bool  # the run had been driven before (an expired or released lease)
    trace_id: str | None = None  # its drive's trace, named by what the claim wrote
    # Not to drive: "blocked" (handed back: an effect awaits reconciliation) or "cancelled"
    # (its cancel flag was set); None: the claimant drives it.
    ended: Literal["blocked", "cancelled"] | None = None


@dataclass(frozen=True)
class Heartbeat:
    """The leases one heartbeat extends, and until when."""

    leases: tuple[Fence, ...]
    expires_at: str
    now: str


_PENDING_APPROVAL = (
    "EXISTS (SELECT 1 FROM approvals a WHERE a.run_id = r.run_id AND a.status = 'pending')"
)
_UNRECONCILED = (
    "EXISTS (SELECT 1 FROM effects e WHERE e.run_id = r.run_id AND e.status = 'uncertain'"
    " AND NOT EXISTS (SELECT 1 FROM effect_reconciliations x WHERE x.effect_id = e.effect_id))"
)
_CLAIMABLE = f"""r.queued_at IS NOT NULL AND ((r.state = 'queued' AND r.owner_pid IS NULL)
    OR (r.state IN ('running', 'paused') AND r.owner_pid IS NOT NULL
        AND r.lease_expires_at IS NOT NULL AND r.lease_expires_at < ?)
    OR (r.state IN ('running', 'paused') AND r.owner_pid IS NULL
        AND NOT {_PENDING_APPROVAL} AND NOT {_UNRECONCILED}))"""
_HELD = """r.queued_at IS NOT NULL AND r.state IN ('running', 'paused')
    AND r.owner_pid IS NOT NULL AND r.lease_expires_at IS NOT NULL AND r.lease_expires_at >= ?"""


def _claimable_ids(conn: Db, limit: int, now: str) -> list[str]:
    lock = " FOR UPDATE OF r SKIP LOCKED" if dialect_of(conn) == "postgresql" else ""
    rows = conn.execute(
        f"SELECT r.run_id FROM runs r WHERE {_CLAIMABLE}"
        f" ORDER BY r.queued_at, r.run_id LIMIT {int(limit)}{lock}",
        (now,),
    ).fetchall()
    return [str(row[0]) for row in rows]


def claim_runs_txn(conn: Db, claim: ClaimRequest) -> tuple[ClaimedRun, ...]:
    """Claim up to ``claim.limit`` runs; every claim, the ones to drive with ``ended`` None."""
    ids = _claimable_ids(conn, claim.limit, claim.now)
    traces = claim.trace_ids
    return tuple(
        _claim_one_txn(conn, run_id, claim, traces[n] if n < len(traces) else None)
        for n, run_id in enumerate(ids)
    )


def _claim_one_txn(conn: Db, run_id: str, claim: ClaimRequest, trace_id: str | None) -> ClaimedRun:
    now = claim.now
    conn.execute(
        "UPDATE runs SET owner_pid = ?, owner_create_time = ?, lease_holder = ?,"
        " lease_expires_at = ?, lease_token = lease_token + 1, updated_at = ? WHERE run_id = ?",
        (claim.owner.pid, claim.owner.create_time, claim.holder, claim.expires_at, now, run_id),
    )
    row = conn.execute("SELECT state, lease_token FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    state, token = str(row["state"]), int(row["lease_token"])
    payload = {"holder": claim.holder, "token": token, "takeover": state != "queued"}
    append_audit_txn(conn, run_id, "run.claimed", dict(payload), now, trace_id=trace_id)
    if state == "queued":
        runs.set_run_state_txn(conn, run_id, "running", now, trace_id=trace_id)
        return ClaimedRun(run_id, token, takeover=False, trace_id=trace_id)
    # A takeover: what the previous holder started, it may have done (resume's rule).
    lost = judge_lost_txn(conn, run_id, now, trace_id)
    if runs.is_cancel_requested(conn, run_id):
        lifecycle.cancel_undriven_txn(conn, run_id, now, trace_id)
        leases.release_run_lease_txn(conn, run_id, claim.owner.pid, now)
        return ClaimedRun(run_id, token, takeover=True, trace_id=trace_id, ended="cancelled")
    if lost:
        leases.release_run_lease_txn(conn, run_id, claim.owner.pid, now)
        blocked = {"token": token}
        append_audit_txn(conn, run_id, "run.blocked", blocked, now, trace_id=trace_id)
        return ClaimedRun(run_id, token, takeover=True, trace_id=trace_id, ended="blocked")
    if state == "paused":
        runs.set_run_state_txn(conn, run_id, "running", now, trace_id=trace_id)
    return ClaimedRun(run_id, token, takeover=True, trace_id=trace_id)


def heartbeat_txn(conn: Db, beat: Heartbeat) -> tuple[str, ...]:
    """Extend every lease still held under its token; returns the runs whose lease is lost."""
    lost = []
    for lease in beat.leases:
        cur = conn.execute(
            "UPDATE runs SET lease_expires_at = ? WHERE run_id = ? AND lease_token = ?"
            " AND owner_pid IS NOT NULL AND lease_expires_at IS NOT NULL",
            (beat.expires_at, lease.run_id, lease.token),
        )
        if cur.rowcount != 1:
            lost.append(lease.run_id)
    return tuple(lost)


def queue_busy(conn: Db, now: str) -> bool:
    """Whether any submitted run is claimable now or held by a live ``serve`` lease."""
    for where in (_CLAIMABLE, _HELD):
        if conn.execute(f"SELECT 1 FROM runs r WHERE {where} LIMIT 1", (now,)).fetchone():
            return True
    return False


def check_fence(conn: Db, fence: Fence) -> None:
    """Refuse the transaction unless ``fence`` still holds the run's lease.

    On SQLite the transaction already holds the one write lock (``BEGIN IMMEDIATE``), so no
    takeover can commit between this check and our commit; on PostgreSQL the row lock taken
    here does the same (a takeover's UPDATE waits for our commit, and then raises the token).
    """
    lock = " FOR UPDATE" if dialect_of(conn) == "postgresql" else ""
    row = conn.execute(
        f"SELECT lease_token FROM runs WHERE run_id = ?{lock}", (fence.run_id,)
    ).fetchone()
    if row is None or int(row[0]) != fence.token:
        raise LeaseLostError(
            f"run {fence.run_id}: this coordinator's lease (token {fence.token}) was taken "
            "over; it commits nothing more for the run",
            run_id=fence.run_id,
        )


def mark_queued_txn(conn: Db, run_id: str, now: str) -> None:
    """Put a just-created (``queued``) run in the queue."""
    conn.execute("UPDATE runs SET queued_at = ? WHERE run_id = ?", (now, run_id))


__all__: Sequence[str] = (
    "ClaimRequest",
    "ClaimedRun",
    "Fence",
    "Heartbeat",
    "check_fence",
    "claim_runs_txn",
    "heartbeat_txn",
    "mark_queued_txn",
    "queue_busy",
)
