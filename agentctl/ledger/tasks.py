"""Task rows: single transitions and the batched, ordered task-completion commit.

Invariants:
- every transition is a guarded ``UPDATE … WHERE state IN (legal predecessors)``; an illegal
  one raises ``InvalidOperationError`` and the caller's transaction rolls back;
- every transition writes its audit event(s) and a checkpoint in the same transaction;
- ``commit_tasks_txn`` applies a parallel batch in the given (compiled) order, then replaces
  working memory and writes ONE checkpoint — the whole batch is one transaction, and it is
  kept to a handful of statements because it sits on the hot path (benchmarks/bench_ledger);
- an agent attempt's pure tool calls that no call of it carried (only a failing attempt
  leaves any: an answer always goes to a next model call) get their rows and budget units
  with its completion; one the budget refuses there gets no row, its overrun recorded, and
  the task fails for its own reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NoReturn

from agentctl.core.canonical import canonical_json, sha256_hex
from agentctl.core.frozen import direct_init
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.taskids import local_namesakes, namesake_hint
from agentctl.errors import InvalidOperationError, NotFoundError
from agentctl.ledger import sessions
from agentctl.ledger.artifacts.refs import ArtifactRef, commit_artifact_refs_txn
from agentctl.ledger.artifacts.values import loads_value, loads_value_object, spill_text
from agentctl.ledger.audit import (
    AuditBuffer,
    append_audit_txn,
    flush_audits_txn,
    write_checkpoint_txn,
)
from agentctl.ledger.rows import (
    checked_name,
    dumps_opt,
    fetch_all,
    fetch_one,
    loads_object,
    loads_opt,
)
from agentctl.ledger.sql import Db, Row
from agentctl.ledger.tool_calls import AnsweredToolCall, insert_answered_txn
from agentctl.ledger.transitions import (
    TASK_PREDECESSORS,
    TASK_STATE_NAMES,
    check_task_transition,
)


@dataclass(frozen=True)
class AuditSpec:
    """An audit event a completion appends (after its own transition)."""

    event_type: str
    payload: JsonValue = None


@direct_init  # one per task row when a drive starts: no frozen-setattr per field
@dataclass(frozen=True)
class LiveTask:
    """What driving a run needs of a task row: no output, no digests (read on demand)."""

    task_id: str
    state: str
    attempt: int
    error: str | None
    updated_at: str | None = None  # when it entered ``state`` (a retry's backoff counts from it)


@dataclass(frozen=True)
class TaskCompletion:
    """A task's final state and what it produced, to commit in compiled order."""

    task_id: str
    state: str
    attempt: int
    disposition: str = "executed"
    output: JsonValue = None
    error: str | None = None
    definition_fingerprint: str | None = None
    input_digest: str | None = None
    output_contract_fingerprint: str | None = None
    output_digest: str | None = None
    state_delta: JsonObject | None = None
    artifacts: Sequence[ArtifactRef] = ()
    ingest_lease_ids: Sequence[str] = ()
    decision: JsonObject | None = None
    source_run_id: str | None = None
    source_task_id: str | None = None
    source_attempt: int | None = None
    events: Sequence[AuditSpec] = ()
    # An agent task: the attempt's provider session ends with it (``sessions.end_attempt_txn``).
    agent: bool = False
    # Its tool calls answered without an effect that no call of the attempt recorded yet.
    answered: Sequence[AnsweredToolCall] = ()
    # ``output``'s canonical JSON when the caller encoded it already (the driver does, for an
    # output a later task's input digest reads): stored as it is, not encoded again.
    output_text: str | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class TaskRecord:
    """One task row as read back."""

    run_id: str
    task_id: str
    position: int
    state: str
    attempt: int
    disposition: str
    output: JsonValue
    error: str | None
    definition_fingerprint: str | None
    input_digest: str | None
    output_contract_fingerprint: str | None
    output_digest: str | None
    state_delta: JsonObject | None
    state_delta_digest: str | None
    artifact_manifest: JsonValue
    source_run_id: str | None
    source_task_id: str | None
    source_attempt: int | None
    decision: JsonObject | None
    updated_at: str

    def to_json(self) -> JsonObject:
        return {
            "taskId": self.task_id,
            "position": self.position,
            "state": self.state,
            "attempt": self.attempt,
            "disposition": self.disposition,
            "output": self.output,
            "error": self.error,
            "definitionFingerprint": self.definition_fingerprint,
            "inputDigest": self.input_digest,
            "outputContractFingerprint": self.output_contract_fingerprint,
            "outputDigest": self.output_digest,
            "stateDelta": self.state_delta,
            "stateDeltaDigest": self.state_delta_digest,
            "artifacts": self.artifact_manifest,
            "sourceRunId": self.source_run_id,
            "sourceTaskId": self.source_task_id,
            "sourceAttempt": self.source_attempt,
            "decision": self.decision,
            "updatedAt": self.updated_at,
        }


def _object_or_none(text: str | None) -> JsonObject | None:
    return None if text is None else loads_object(text)


def _task(conn: Db, row: Row) -> TaskRecord:
    delta = row["state_delta_json"]
    return TaskRecord(
        run_id=row["run_id"],
        task_id=row["task_id"],
        position=row["position"],
        state=task_state_of(row),
        attempt=row["attempt"],
        disposition=row["disposition"],
        output=loads_value(conn, row["output_json"]),
        error=row["error"],
        definition_fingerprint=row["definition_fingerprint"],
        input_digest=row["input_digest"],
        output_contract_fingerprint=row["output_contract_fingerprint"],
        output_digest=row["output_digest"],
        state_delta=None if delta is None else loads_value_object(conn, delta),
        state_delta_digest=row["state_delta_digest"],
        artifact_manifest=loads_opt(row["artifact_manifest_json"]),
        source_run_id=row["source_run_id"],
        source_task_id=row["source_task_id"],
        source_attempt=row["source_attempt"],
        decision=_object_or_none(row["decision_json"]),
        updated_at=row["updated_at"],
    )


def _guard(state: str) -> str:
    preds = TASK_PREDECESSORS.get(state, ())
    return f"state IN ({','.join(repr(p) for p in preds)})" if preds else "0"


_COMPLETE_SQL = {
    state: f"""UPDATE task_states SET state = ?, attempt = ?, disposition = ?, output_json = ?,
        error = ?, definition_fingerprint = ?, input_digest = ?, output_contract_fingerprint = ?,
        output_digest = ?, state_delta_json = ?, state_delta_digest = ?,
        artifact_manifest_json = ?, source_run_id = ?, source_task_id = ?, source_attempt = ?,
        decision_json = ?, updated_at = ?
        WHERE run_id = ? AND task_id = ? AND {_guard(state)}"""
    for state in TASK_PREDECESSORS
}

_TRANSITION_SQL = {
    state: f"""UPDATE task_states SET state = ?, attempt = COALESCE(?, attempt),
        error = COALESCE(?, error), updated_at = ?
        WHERE run_id = ? AND task_id = ? AND {_guard(state)}"""
    for state in TASK_PREDECESSORS
}
# The same moves, answering the row's attempt (``transition_task_txn`` audits it).
_TRANSITION_RETURNING = {
    state: sql + " RETURNING attempt" for state, sql in _TRANSITION_SQL.items()
}


def _refuse(conn: Db, run_id: str, task_id: str, state: str) -> NoReturn:
    """Explain why a guarded update matched no row: unknown task or illegal transition."""
    row = conn.execute(
        "SELECT state FROM task_states WHERE run_id = ? AND task_id = ?", (run_id, task_id)
    ).fetchone()
    if row is None:
        raise NotFoundError(f"task {task_id} of run {run_id} not found")
    check_task_transition(row["state"], state)
    raise InvalidOperationError(f"task {task_id} could not move from {row['state']} to {state}")


def _stored_and_digest(
    conn: Db, value: JsonValue, now: str, text: str | None = None
) -> tuple[str | None, str | None]:
    """A content column's text and the digest of the value, from one canonical encoding
    (``text``, when the caller has it already)."""
    if value is None:
        return None, None
    if text is None:
        text = canonical_json(value)
    return spill_text(conn, text, now), sha256_hex(text)


# Canonical JSON texts a transaction encoded already, by the id of the value they encode (an
# effect's result is most often its task's output too: the same object, encoded once). The
# values are alive for the whole call that holds the map, so an id names one value.
KnownTexts = Mapping[int, str]


def _complete_one(
    conn: Db, run_id: str, c: TaskCompletion, now: str, known: KnownTexts | None
) -> None:
    sql = _COMPLETE_SQL.get(c.state)
    delta, delta_digest = _stored_and_digest(conn, c.state_delta, now)
    text = c.output_text
    if text is None and known is not None and c.output is not None:
        text = known.get(id(c.output))
    output, output_digest = _stored_and_digest(conn, c.output, now, text)
    output_digest = c.output_digest or output_digest
    manifest = [r.to_json() for r in c.artifacts] if c.artifacts else None
    params = (
        c.state,
        c.attempt,
        c.disposition,
        output,
        c.error,
        c.definition_fingerprint,
        c.input_digest,
        c.output_contract_fingerprint,
        output_digest,
        delta,
        delta_digest,
        dumps_opt(manifest),
        c.source_run_id,
        c.source_task_id,
        c.source_attempt,
        dumps_opt(c.decision),
        now,
        run_id,
        c.task_id,
    )
    if sql is None or conn.execute(sql, params).rowcount != 1:
        _refuse(conn, run_id, c.task_id, c.state)
    if c.agent:
        sessions.end_attempt_txn(conn, run_id, c.task_id, c.state, now, c.attempt)
    if c.artifacts or c.ingest_lease_ids:
        commit_artifact_refs_txn(
            conn, run_id, c.task_id, c.attempt, c.artifacts, c.ingest_lease_ids, now
        )


def _add_completion_events(
    buffer: AuditBuffer, c: TaskCompletion, w: CompletionWriting, trace_id: str | None
) -> None:
    if w.add_events is not None:
        w.add_events(buffer, c, trace_id)
        return
    for ev in c.events or (AuditSpec(f"task.{c.state}", None),):
        payload = ev.payload
        if payload is None:
            payload = {"attempt": c.attempt, "disposition": c.disposition}
        buffer.add(ev.event_type, payload, c.task_id, trace_id)


@dataclass(frozen=True)
class CompletionWriting:
    """How ``commit_tasks_txn`` writes: ``buffer`` collects its audit events for the caller
    to write; ``known_texts`` are outputs' canonical JSON encoded already; ``add_events`` adds
    a completion's events to the buffer (default: its ``events``); ``before`` runs before each
    completion is applied (a batch's walk of that task through its intermediate states, so
    the audit keeps compiled order task by task)."""

    buffer: AuditBuffer | None = None
    known_texts: KnownTexts | None = None
    add_events: Callable[[AuditBuffer, TaskCompletion, str | None], None] | None = None
    before: Callable[[TaskCompletion], None] | None = None


def commit_tasks_txn(
    conn: Db,
    run_id: str,
    completions: Sequence[TaskCompletion],
    working_memory: JsonValue,
    now: str,
    *,
    trace_id: str | None = None,
    checkpoint: bool = True,
    written: CompletionWriting | None = None,
) -> JsonObject:
    """Commit a batch of task results in order, then memory (unless ``None``) and one
    checkpoint, whose state it returns (``checkpoint=False``: the caller merges it into the
    one checkpoint of a larger transaction). The task events go into ``written.buffer`` when
    given (the caller writes them), else they are written here."""
    w = written or CompletionWriting()
    buffer = AuditBuffer() if w.buffer is None else w.buffer
    summary: list[JsonValue] = []
    for c in completions:
        if w.before is not None:
            w.before(c)
        if c.artifacts or c.ingest_lease_ids or c.answered:  # rows that may audit: keep order
            flush_audits_txn(conn, run_id, buffer, now)
            insert_answered_txn(conn, run_id, c.answered, now, trace_id)  # a failed attempt's
        _complete_one(conn, run_id, c, now, w.known_texts)
        _add_completion_events(buffer, c, w, trace_id)
        summary.append({"taskId": c.task_id, "state": c.state, "attempt": c.attempt})
    if w.buffer is None:
        flush_audits_txn(conn, run_id, buffer, now)
    state: JsonObject = {"runId": run_id, "event": "tasks.committed", "tasks": summary}
    if working_memory is None:
        conn.execute("UPDATE runs SET updated_at = ? WHERE run_id = ?", (now, run_id))
    else:
        text, digest = _stored_and_digest(conn, working_memory, now)
        conn.execute(
            "UPDATE runs SET working_memory_json = ?, updated_at = ? WHERE run_id = ?",
            (text, now, run_id),
        )
        state["workingMemoryDigest"] = digest
    if checkpoint:
        write_checkpoint_txn(conn, run_id, state, now)
    return state


def transition_task_txn(
    conn: Db,
    run_id: str,
    task_id: str,
    state: str,
    now: str,
    *,
    attempt: int | None = None,
    error: str | None = None,
    payload: JsonValue = None,
    trace_id: str | None = None,
    checkpoint: bool = True,
) -> None:
    """Move one task (e.g. to ready/running/retry_scheduled/waiting_for_approval).

    ``checkpoint=False`` is for a caller that moves several tasks in one transaction and
    writes one checkpoint itself before committing.
    """
    sql = _TRANSITION_RETURNING.get(state)
    params = (state, attempt, error, now, run_id, task_id)
    moved = None if sql is None else conn.execute(sql, params).fetchone()
    if moved is None:
        _refuse(conn, run_id, task_id, state)
    sessions.end_attempt_txn(conn, run_id, task_id, state, now)  # a cancel, a fresh attempt
    # Every task event names its attempt (docs/events.md), the row's when the caller gave none.
    body = payload if payload is not None else {"attempt": int(moved["attempt"])}
    append_audit_txn(conn, run_id, f"task.{state}", body, now, task_id=task_id, trace_id=trace_id)
    if not checkpoint:
        return
    write_checkpoint_txn(
        conn,
        run_id,
        {"runId": run_id, "event": f"task.{state}", "tasks": [{"taskId": task_id, "state": state}]},
        now,
    )


def advance_task_txn(
    conn: Db,
    run_id: str,
    task_id: str,
    path: Sequence[str],
    now: str,
    *,
    attempt: int | None = None,
    trace_id: str | None = None,
    buffer: AuditBuffer | None = None,
) -> None:
    """Move one task along ``path`` (each state legal after the one before, as
    ``steps.transition_path`` gives them) in one guarded UPDATE, auditing every state passed.

    The guard is the first state's, exactly the one a walk of single transitions would check
    first; every later step is legal by construction, so one UPDATE to the last state leaves
    the row where the walk would. Each step is still its own ``task.<state>`` event, in order.
    No checkpoint: the caller's transaction writes one; ``buffer``: the events are collected
    there for the caller to write.
    """
    sql = _TRANSITION_SQL.get(path[0])
    params = (path[-1], attempt, None, now, run_id, task_id)
    if sql is None or conn.execute(sql, params).rowcount != 1:
        _refuse(conn, run_id, task_id, path[0])
    body: JsonObject = {"attempt": attempt} if attempt else {}
    events = AuditBuffer() if buffer is None else buffer
    for state in path:
        events.add(f"task.{state}", body, task_id, trace_id)
    if buffer is None:
        events.flush_txn(conn, run_id, now)


def list_tasks(conn: Db, run_id: str) -> list[TaskRecord]:
    """The run's tasks in compiled order."""
    rows = fetch_all(
        conn, "SELECT * FROM task_states WHERE run_id = ? ORDER BY position", (run_id,), "task"
    )
    return [_task(conn, r) for r in rows]


def get_task(conn: Db, run_id: str, task_id: str) -> TaskRecord:
    row = fetch_one(
        conn,
        "SELECT * FROM task_states WHERE run_id = ? AND task_id = ?",
        (run_id, task_id),
        "task",
    )
    return _task(conn, row)


def check_task(conn: Db, run_id: str, task_id: str) -> None:
    """``NotFoundError`` naming both unless ``task_id`` is a task of the run: a filter that
    names nothing (a typo, an empty string) must not read as "no rows". Every task the plan
    holds has its row — expanded children (``save--0000-…``) and aggregates included."""
    found = conn.execute(
        "SELECT 1 FROM task_states WHERE run_id = ? AND task_id = ?", (run_id, task_id)
    ).fetchone()
    if found is None:
        rows = conn.execute(  # only on this error path: the hint's candidates, in plan order
            "SELECT task_id FROM task_states WHERE run_id = ? ORDER BY position", (run_id,)
        ).fetchall()
        hint = namesake_hint(local_namesakes((str(r[0]) for r in rows), task_id))
        raise NotFoundError(f"task {task_id!r} not found in run {run_id}{hint}", run_id=run_id)


# Finished outputs are read back by id in chunks under SQLite's bound-parameter limit.
_READ_CHUNK = 500


def list_live_tasks(conn: Db, run_id: str) -> list[LiveTask]:
    """The run's tasks in compiled order, only the columns a coordinator drives with."""
    rows = fetch_all(
        conn,
        "SELECT task_id, state, attempt, error, updated_at, format_version FROM task_states"
        " WHERE run_id = ? ORDER BY position",
        (run_id,),
        "task",
    )
    return [
        LiveTask(r["task_id"], task_state_of(r), r["attempt"], r["error"], r["updated_at"])
        for r in rows
    ]


def task_state_of(row: Row) -> str:
    """A task row's ``state``, refused unless it is a task state (spec/cli.md §3)."""
    state = row["state"]
    if state in TASK_STATE_NAMES:  # the message is spelled only for a refusal (a run's rows)
        return str(state)
    return checked_name(state, TASK_STATE_NAMES, f"task {row['task_id']}'s stored state")


def read_outputs(conn: Db, run_id: str, task_ids: Sequence[str] | None) -> dict[str, JsonValue]:
    """Outputs of the run's succeeded or skipped tasks among ``task_ids`` (None: all of
    them), in compiled order; a task without a finished output is absent."""
    base = (
        "SELECT task_id, output_json, format_version FROM task_states WHERE run_id = ?"
        " AND state IN ('succeeded', 'skipped')"
    )
    if task_ids is None:
        rows = fetch_all(conn, base + " ORDER BY position", (run_id,), "task")
    else:
        rows = []
        wanted = list(dict.fromkeys(task_ids))
        for start in range(0, len(wanted), _READ_CHUNK):
            chunk = wanted[start : start + _READ_CHUNK]
            marks = ", ".join("?" * len(chunk))
            sql = f"{base} AND task_id IN ({marks}) ORDER BY position"
            rows += fetch_all(conn, sql, (run_id, *chunk), "task")
    return {r["task_id"]: loads_value(conn, r["output_json"]) for r in rows}
