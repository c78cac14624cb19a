"""The ownership lease of a run: who drives it, and taking, checking and dropping that.

Invariants:
- at most one live coordinator owns a run: a local lease (``run``/``resume``) records pid,
  process create time and host, and is taken over only once its process is gone (or its pid
  was reused); a ``serve`` lease carries an expiry and is live until then, whatever host;
- every take raises the run's fencing token (``lease_token``), so a ``serve`` whose expired
  lease was taken commits nothing more for the run;
- refusing (``refuse_other_owner_txn``) writes nothing, so a caller may judge first and take
  the lease (``take_run_lease_txn``) only once it knows it will drive the run.
"""

from __future__ import annotations

import socket

from agentctl.errors import OwnershipError, RunNotFoundError
from agentctl.ledger.owners import owner_alive
from agentctl.ledger.sql import Db, Row


def local_holder(pid: int) -> str:
    """How a local lease (``run``/``resume``) names its holder: this host and the pid, the
    form a ``serve`` lease uses too."""
    return f"{socket.gethostname()}:{pid}"


def _elsewhere(holder: object) -> str | None:
    """The other host holding a local lease, or None when it is this host (or unrecorded:
    a lease written before hosts were recorded, which only one host could have written)."""
    if not isinstance(holder, str) or ":" not in holder:
        return None
    host = holder.rsplit(":", 1)[0]
    return None if host == socket.gethostname() else host


def _local_owner_alive(row: Row) -> bool:
    """A local lease's owner is alive; a process of another host counts as alive, since its
    liveness cannot be read from here (only expiring ``serve`` leases move between hosts)."""
    if _elsewhere(row["lease_holder"]) is not None:
        return True
    return owner_alive(int(row["owner_pid"]), row["owner_create_time"])


def _lease_row(conn: Db, run_id: str) -> Row | None:
    row: Row | None = conn.execute(
        "SELECT owner_pid, owner_create_time, lease_expires_at, lease_holder"
        " FROM runs WHERE run_id = ?",
        (run_id,),
    ).fetchone()
    return row


def has_live_owner(conn: Db, run_id: str, now: str | None = None) -> bool:
    """Whether a live process holds the run's lease (it is being driven right now).

    A ``serve`` lease (one with an expiry) is live until it expires, whatever host holds it;
    a local lease (``run``/``resume``) is live while its process is.
    """
    row = _lease_row(conn, run_id)
    if row is None or row["owner_pid"] is None:
        return False
    if row["lease_expires_at"] is not None:
        return now is None or str(row["lease_expires_at"]) > now
    return _local_owner_alive(row)


def fence_out_expired_txn(conn: Db, run_id: str, now: str) -> None:
    """Raise the fencing token of ``run_id`` if a ``serve`` lease on it has expired: its holder
    may be stalled rather than dead, and once an operator has judged the run's work (an
    effect reconciled) it must commit nothing more for it — its next write is refused and it
    reports the run lost; a live lease is refused before this (``has_live_owner``)."""
    conn.execute(
        "UPDATE runs SET lease_token = lease_token + 1 WHERE run_id = ?"
        " AND owner_pid IS NOT NULL AND lease_expires_at IS NOT NULL AND lease_expires_at <= ?",
        (run_id, now),
    )


def has_dead_local_owner(conn: Db, run_id: str) -> bool:
    """Whether the run's lease is a local one (``run``/``resume``) whose process of this host
    is gone: a coordinator killed before it could release it. A ``serve`` lease is not
    judged here (it expires; its claim honours a cancel flag)."""
    row = _lease_row(conn, run_id)
    if row is None or row["owner_pid"] is None or row["lease_expires_at"] is not None:
        return False
    return not _local_owner_alive(row)


def acquire_run_lease_txn(conn: Db, run_id: str, pid: int, create_time: float, now: str) -> None:
    """Make (pid, create_time) the local owner of ``run_id`` unless a live other owner holds
    it; the fencing token goes up, so a ``serve`` whose expired lease this takes commits
    nothing more for the run."""
    refuse_other_owner_txn(conn, run_id, pid, create_time, now)
    take_run_lease_txn(conn, run_id, pid, create_time, now)


def refuse_other_owner_txn(conn: Db, run_id: str, pid: int, create_time: float, now: str) -> None:
    """Raise unless (pid, create_time) may own ``run_id``: no unexpired lease and no other
    live local owner holds it. Writes nothing."""
    row = _lease_row(conn, run_id)
    if row is None:
        raise RunNotFoundError(f"run {run_id} not found")
    owner, owner_time = row["owner_pid"], row["owner_create_time"]
    expires = row["lease_expires_at"]
    if expires is not None and owner is not None and str(expires) > now:
        raise OwnershipError(
            f"run {run_id} is being driven by {row['lease_holder']} (lease until {expires}); "
            f"wait for it or `agentctl cancel {run_id}`",
            run_id=run_id,
        )
    same = owner == pid and owner_time is not None and abs(owner_time - create_time) < 0.01
    if expires is None and owner is not None and not same and _local_owner_alive(row):
        raise _held_locally(run_id, owner, _elsewhere(row["lease_holder"]))


def take_run_lease_txn(conn: Db, run_id: str, pid: int, create_time: float, now: str) -> None:
    """Record (pid, create_time) as ``run_id``'s local owner, its fencing token one up; only
    after ``refuse_other_owner_txn`` in the same transaction."""
    conn.execute(
        "UPDATE runs SET owner_pid = ?, owner_create_time = ?, updated_at = ?,"
        " lease_token = lease_token + 1, lease_expires_at = NULL, lease_holder = ?"
        " WHERE run_id = ?",
        (pid, create_time, now, local_holder(pid), run_id),
    )


def _held_locally(run_id: str, pid: int, host: str | None) -> OwnershipError:
    if host is None:
        return OwnershipError(
            f"run {run_id} is being driven by a live coordinator (pid {pid}); "
            f"wait for it or `agentctl cancel {run_id}`",
            run_id=run_id,
        )
    return OwnershipError(
        f"run {run_id} is leased by pid {pid} on host {host}, whose liveness this host cannot "
        f"see; run the command on {host} (it resumes the run if that process is gone), "
        f"or `agentctl cancel {run_id}`",
        run_id=run_id,
    )


def release_run_lease_txn(conn: Db, run_id: str, pid: int, now: str) -> None:
    """Drop the lease if ``pid`` holds it; a lease held by another process is left alone
    (a ``serve`` writes under its fencing token, so a pid of another host never matches)."""
    conn.execute(
        "UPDATE runs SET owner_pid = NULL, owner_create_time = NULL, lease_expires_at = NULL,"
        " lease_holder = NULL, updated_at = ? WHERE run_id = ? AND owner_pid = ?",
        (now, run_id, pid),
    )
