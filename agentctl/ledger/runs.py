"""Run rows: creation, lookup, state changes and the cancellation flag (the ownership lease
is ``ledger.leases``).

Invariants:
- a run is created together with one ``pending`` task row per plan task (position = plan
  index), its zero budget ledger, a ``run.created`` audit event and a checkpoint — one txn;
- run state changes follow ``transitions.RUN_TRANSITIONS``; terminal runs never change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.errors import CancelledRunError, NotFoundError, RunNotFoundError
from agentctl.ledger.artifacts.values import (
    dumps_value,
    dumps_value_opt,
    loads_value,
    loads_value_object,
    spill_text,
)
from agentctl.ledger.audit import append_audit_txn, write_checkpoint_txn
from agentctl.ledger.budget import init_budget_txn
from agentctl.ledger.idprefix import IdKind, find_row
from agentctl.ledger.plans import PlanText, read_plan_text, write_plan_txn
from agentctl.ledger.rows import (
    ROW_FORMAT_VERSION,
    checked_name,
    dumps_opt,
    fetch_all,
    fetch_one,
    loads_object,
    loads_opt,
    parse_ts,
)
from agentctl.ledger.sql import Db, Row, SqlParam
from agentctl.ledger.transitions import (
    RUN_MODE_NAMES,
    RUN_PREDECESSORS,
    RUN_STATE_NAMES,
    check_run_transition,
)


@dataclass(frozen=True)
class NewRun:
    """A run to create: its document, its compiled plan and its settings."""

    run_id: str
    mode: str
    workflow_name: str
    workflow_digest: str
    plan_digest: str
    workflow: JsonObject
    plan: JsonObject
    inputs: JsonObject
    working_memory: JsonObject
    trace_id: str
    base_path: str | None = None
    parent_run_id: str | None = None
    source_run_id: str | None = None
    roots: Sequence[str] | None = None
    reason: str | None = None
    budget_limits: Mapping[str, int] = field(default_factory=dict)
    state: str = "running"
    # The compiled plan as JSON text, stored as given (the ledger never interprets it); as
    # ``PlanText`` pieces, never held whole.
    compiled_plan_json: str | PlanText | None = None
    # ``workflow``'s canonical JSON when the caller has it already (the compile made it for the
    # workflow digest): stored as ``dumps_value`` would store ``workflow``, without encoding it.
    workflow_text: str | None = None


@dataclass(frozen=True)
class RunRecord:
    """One run row as read back."""

    run_id: str
    state: str
    mode: str
    workflow_name: str
    workflow_digest: str
    plan_digest: str
    workflow: JsonObject
    # The printed plan as stored: empty for runs that store only the compiled one (``plan``).
    stored_plan: JsonObject
    inputs: JsonObject
    working_memory: JsonObject
    output: JsonValue
    parent_run_id: str | None
    source_run_id: str | None
    roots: list[str] | None
    reason: str | None
    cancellation_requested: bool
    base_path: str | None
    trace_id: str
    owner_pid: int | None
    owner_create_time: float | None
    created_at: str
    updated_at: str
    # Kept as text: it is large, and only resume, fork and compensate parse it (None: the
    # run was created before schema v4).
    compiled_plan_json: str | None = None

    @cached_property
    def plan(self) -> JsonObject:
        """The printed plan (``plan_to_json``): as stored, or derived from the compiled plan
        (runs since fast-compile store only that one; the two agree, see tests/core/
        test_stored_plan.py). Derived on first use: most readers of a run never ask."""
        if self.stored_plan or self.compiled_plan_json is None:
            return self.stored_plan
        from agentctl.core.compiler import plan_to_json
        from agentctl.core.compiler.stored import plan_from_stored

        return plan_to_json(plan_from_stored(loads_object(self.compiled_plan_json)))

    def to_json(self) -> JsonObject:
        return {
            "runId": self.run_id,
            "state": self.state,
            "mode": self.mode,
            "workflow": self.workflow_name,
            "workflowDigest": self.workflow_digest,
            "planDigest": self.plan_digest,
            "parentRunId": self.parent_run_id,
            "sourceRunId": self.source_run_id,
            "roots": None if self.roots is None else list[JsonValue](self.roots),
            "reason": self.reason,
            "inputs": self.inputs,
            "output": self.output,
            "basePath": self.base_path,
            "traceId": self.trace_id,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "cancellationRequested": self.cancellation_requested,
        }

    def summary_json(self) -> JsonObject:
        """The ``runs list`` entry shape."""
        keys = ("runId", "state", "mode", "workflow", "createdAt", "updatedAt")
        full = self.to_json()
        return {k: full[k] for k in (*keys, "parentRunId", "sourceRunId")}


def _roots(text: str | None) -> list[str] | None:
    value = loads_opt(text)
    return [str(r) for r in value] if isinstance(value, list) else None


def run_state_of(row: Row) -> str:
    """A run row's ``state``, refused unless it is a run state (spec/cli.md §3)."""
    return checked_name(row["state"], RUN_STATE_NAMES, f"run {row['run_id']}'s stored state")


def run_mode_of(row: Row) -> str:
    return checked_name(row["mode"], RUN_MODE_NAMES, f"run {row['run_id']}'s stored mode")


def _run(conn: Db, row: Row) -> RunRecord:
    return RunRecord(
        run_id=row["run_id"],
        state=run_state_of(row),
        mode=run_mode_of(row),
        workflow_name=row["workflow_name"],
        workflow_digest=row["workflow_digest"],
        plan_digest=row["plan_digest"],
        workflow=loads_value_object(conn, row["doc_workflow_json"]),
        stored_plan=loads_value_object(conn, row["doc_plan_json"]),
        inputs=loads_value_object(conn, row["inputs_json"]),
        working_memory=loads_value_object(conn, row["working_memory_json"]),
        output=loads_value(conn, row["output_json"]),
        parent_run_id=row["parent_run_id"],
        source_run_id=row["source_run_id"],
        roots=_roots(row["roots_json"]),
        reason=row["reason"],
        cancellation_requested=bool(row["cancellation_requested"]),
        base_path=row["base_path"],
        trace_id=row["trace_id"],
        owner_pid=row["owner_pid"],
        owner_create_time=row["owner_create_time"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        compiled_plan_json=read_plan_text(
            conn, row["run_id"], row["doc_compiled_plan_json"], row["doc_plan_parts"]
        ),
    )


# A run with its documents (kept in ``run_documents``: see migration v12; the compiled plan
# in ``run_plan_parts`` when ``plan_parts`` counts them: ``ledger.plans``).
_SELECT_RUN = """SELECT runs.*, d.workflow_json AS doc_workflow_json,
    d.plan_json AS doc_plan_json, d.compiled_plan_json AS doc_compiled_plan_json,
    d.plan_parts AS doc_plan_parts FROM runs JOIN run_documents d ON d.run_id = runs.run_id"""


_INSERT_RUN = """INSERT INTO runs (run_id, format_version, state, mode, workflow_name,
    workflow_digest, plan_digest, workflow_json, plan_json, inputs_json, working_memory_json,
    parent_run_id, source_run_id, roots_json, reason, base_path, trace_id, created_at, updated_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, '{}', '{}', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""
_INSERT_DOCUMENTS = """INSERT INTO run_documents (run_id, workflow_json, plan_json,
    compiled_plan_json, plan_parts) VALUES (?, ?, ?, ?, ?)"""


def _run_values(conn: Db, run: NewRun, now: str) -> tuple[str | int | None, ...]:
    """The ``_INSERT_RUN`` parameters of ``run``, in column order."""
    return (
        run.run_id,
        ROW_FORMAT_VERSION,
        run.state,
        run.mode,
        run.workflow_name,
        run.workflow_digest,
        run.plan_digest,
        dumps_value(conn, run.inputs, now),
        dumps_value(conn, run.working_memory, now),
        run.parent_run_id,
        run.source_run_id,
        dumps_opt(None if run.roots is None else list(run.roots)),
        run.reason,
        run.base_path,
        run.trace_id,
        now,
        now,
    )


def _insert_documents_txn(conn: Db, run: NewRun, now: str) -> None:
    """The run's compiled plan (in parts: ``ledger.plans``), then its documents row."""
    inline, parts = write_plan_txn(conn, run.run_id, run.compiled_plan_json, now)
    workflow = (
        dumps_value(conn, run.workflow, now)
        if run.workflow_text is None
        else spill_text(conn, run.workflow_text, now)
    )
    printed = dumps_value(conn, run.plan, now)
    conn.execute(_INSERT_DOCUMENTS, (run.run_id, workflow, printed, inline, parts))


def create_run_txn(conn: Db, run: NewRun, task_ids_in_order: Sequence[str], now: str) -> None:
    """Insert the run, its pending tasks, its budget ledger, audit and first checkpoint."""
    conn.execute(_INSERT_RUN, _run_values(conn, run, now))
    _insert_documents_txn(conn, run, now)
    conn.executemany(
        "INSERT INTO task_states (run_id, task_id, format_version, position, state, updated_at)"
        " VALUES (?, ?, ?, ?, 'pending', ?)",
        [(run.run_id, t, ROW_FORMAT_VERSION, i, now) for i, t in enumerate(task_ids_in_order)],
    )
    init_budget_txn(conn, run.run_id, run.budget_limits, now)
    payload = {"mode": run.mode, "workflow": run.workflow_name, "tasks": len(task_ids_in_order)}
    append_audit_txn(conn, run.run_id, "run.created", payload, now, trace_id=run.trace_id)
    write_checkpoint_txn(
        conn, run.run_id, {"runId": run.run_id, "event": "run.created", "runState": run.state}, now
    )


def get_run(conn: Db, run_id: str) -> RunRecord:
    return _run(conn, fetch_one(conn, f"{_SELECT_RUN} WHERE runs.run_id = ?", (run_id,), "run"))


def get_run_state(conn: Db, run_id: str) -> tuple[JsonObject, JsonObject]:
    """(inputs, working memory) of a run: what driving needs of its row, without parsing the
    stored workflow and plans (tens of MB for a 10,000-task run)."""
    row = fetch_one(
        conn,
        "SELECT inputs_json, working_memory_json, format_version FROM runs WHERE run_id = ?",
        (run_id,),
        "run",
    )
    inputs = loads_value_object(conn, row["inputs_json"])
    return inputs, loads_value_object(conn, row["working_memory_json"])


# A run's id or a unique prefix of it (``idprefix``: the rule runs and approvals share).
RUN_ID = IdKind("run", "runs.run_id", RunNotFoundError)


def find_run(conn: Db, prefix: str) -> RunRecord:
    """The run whose id is ``prefix`` or uniquely starts with it."""
    return _run(conn, find_row(conn, prefix, _SELECT_RUN, RUN_ID))


@dataclass(frozen=True)
class RunHead:
    """A run's identity and states, without its stored documents (cheap to read)."""

    run_id: str
    state: str
    mode: str


def find_run_head(conn: Db, prefix: str) -> RunHead:
    """``find_run`` without parsing the stored workflow and plans (resume reads those once)."""
    row = find_row(conn, prefix, "SELECT run_id, state, mode, format_version FROM runs", RUN_ID)
    return RunHead(row["run_id"], run_state_of(row), run_mode_of(row))


def list_runs(
    conn: Db,
    *,
    state: str | None = None,
    limit: int | None = None,
    workflow: str | None = None,
) -> list[RunRecord]:
    """Runs newest first, optionally filtered by state and workflow name."""
    wanted = {"runs.state": state, "runs.workflow_name": workflow}
    filters = {column: value for column, value in wanted.items() if value is not None}
    sql = _SELECT_RUN
    if filters:
        sql += " WHERE " + " AND ".join(f"{column} = ?" for column in filters)
    params: tuple[SqlParam, ...] = tuple(filters.values())
    sql += " ORDER BY runs.created_at DESC, runs.run_id DESC"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return [_run(conn, r) for r in fetch_all(conn, sql, params, "run")]


def _current_state(conn: Db, run_id: str) -> str:
    row = conn.execute("SELECT run_id, state FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        raise RunNotFoundError(f"run {run_id} not found")
    return run_state_of(row)


def set_run_state_txn(
    conn: Db,
    run_id: str,
    state: str,
    now: str,
    *,
    output: JsonValue = None,
    error: str | None = None,
    trace_id: str | None = None,
) -> None:
    """Move the run to ``state`` (legal transitions only), with audit and checkpoint."""
    allowed = RUN_PREDECESSORS.get(state, ())
    marks = ",".join("?" * len(allowed)) or "NULL"
    cur = conn.execute(
        f"UPDATE runs SET state = ?, updated_at = ?, output_json = COALESCE(?, output_json)"
        f" WHERE run_id = ? AND state IN ({marks})",
        (state, now, dumps_value_opt(conn, output, now), run_id, *allowed),
    )
    if cur.rowcount != 1:
        check_run_transition(_current_state(conn, run_id), state)
    payload: JsonObject = {"state": state}
    if error is not None:
        payload["error"] = error
    append_audit_txn(conn, run_id, f"run.{state}", payload, now, trace_id=trace_id)
    write_checkpoint_txn(
        conn, run_id, {"runId": run_id, "event": f"run.{state}", "runState": state}, now
    )


def raise_cancel_flag_txn(conn: Db, run_id: str, now: str) -> None:
    """Set the durable cancel flag of a queued, running or paused run (else
    ``NotFoundError``). One statement on the run's row and nothing else: it runs where a
    busy coordinator cannot starve it (``Transactions.run_flag_write``)."""
    cur = conn.execute(
        "UPDATE runs SET cancellation_requested = 1, updated_at = ?"
        " WHERE run_id = ? AND state IN ('queued', 'running', 'paused')",
        (now, run_id),
    )
    if cur.rowcount != 1:  # the run exists (found by its reference): it has ended
        raise NotFoundError(f"no running or paused run {run_id} to cancel", run_id=run_id)


def record_cancel_request_txn(
    conn: Db, run_id: str, now: str, *, trace_id: str | None = None
) -> None:
    """The audit event and checkpoint of a cancel request whose flag is raised."""
    append_audit_txn(conn, run_id, "run.cancellation_requested", {}, now, trace_id=trace_id)
    write_checkpoint_txn(
        conn, run_id, {"runId": run_id, "event": "run.cancellation_requested"}, now
    )


def refuse_if_cancel_requested_txn(conn: Db, run_id: str) -> None:
    """Raise ``CancelledRunError`` when the run's cancel flag is up: the first statement of
    every transaction that starts work (an effect, an agent, a call). The flag's own write
    and this transaction are serialized by the database, so no effect starts after a
    `cancel` that returned: the driver honours the request at this boundary, and the
    rollback leaves the transaction's carried completions staged for the drive's last
    commit."""
    if is_cancel_requested(conn, run_id):
        raise CancelledRunError(f"run {run_id}: cancellation requested; nothing more starts")


def is_cancel_requested(conn: Db, run_id: str) -> bool:
    row = conn.execute(
        "SELECT cancellation_requested FROM runs WHERE run_id = ?", (run_id,)
    ).fetchone()
    if row is None:
        raise RunNotFoundError(f"run {run_id} not found")
    return bool(row[0])


def wall_time_exceeded(run: RunRecord, limit_s: float, now: str) -> bool:
    """Whether more than ``limit_s`` seconds passed since the durable creation time."""
    return (parse_ts(now) - parse_ts(run.created_at)).total_seconds() > limit_s
