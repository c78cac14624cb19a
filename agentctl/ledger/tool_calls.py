"""Tool-call rows: one per call an agent's model makes to a declared tool.

Invariants: a call's row starts with its effect (``started``) or waits with it
(``waiting_for_approval``); it finishes in the same transaction as its effect (the caller's),
and ``call_id`` keys it within the run while ``provider_call_id`` keeps the model's own id.
A call answered without an effect (a pure tool: ``builtin.echo``) has no transaction of its
own: its whole row (``succeeded``, no effect) rides the attempt's next write — its next call's
record, or the task's completion — and is written once, however often a resume repeats it.
Its budget units (one ``toolCalls``) are reserved and settled with its row, before anything
of that write is recorded or dispatched, keyed by the call (``tool-call:<call_id>``): a call
the budget refuses gets no row, and the write it rode stops there (spec/cli.md §7).
The rows are a record to show, never read back to run anything: a call's input and output
are stored with every sensitive key's value replaced whole (``core.redact``, spec/cli.md
§12) — the effect keeps the request it executes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.redact import redact
from agentctl.errors import InvalidOperationError
from agentctl.ledger import budget
from agentctl.ledger.artifacts.values import dumps_value, dumps_value_opt, loads_value
from agentctl.ledger.rows import ROW_FORMAT_VERSION, fetch_all
from agentctl.ledger.sql import Db


def insert_tool_call_txn(
    conn: Db,
    run_id: str,
    call_id: str,
    task_id: str,
    tool: str,
    tool_input: JsonValue,
    now: str,
    *,
    effect_id: str | None = None,
    status: str = "started",
    attempt: int | None = None,
    provider_call_id: str | None = None,
) -> None:
    """A tool call's row: ``started`` with its effect, or ``waiting_for_approval`` when held.
    ``call_id`` keys it in the run; ``provider_call_id`` is the id the model gave the call;
    ``tool_input`` the arguments the model sent (the executor's request stays on the effect)."""
    conn.execute(
        "INSERT INTO tool_calls (run_id, call_id, format_version, task_id, effect_id, tool,"
        " status, input_json, created_at, attempt, provider_call_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            run_id,
            call_id,
            ROW_FORMAT_VERSION,
            task_id,
            effect_id,
            tool,
            status,
            dumps_value(conn, redact(tool_input), now),
            now,
            attempt,
            provider_call_id,
        ),
    )


@dataclass(frozen=True)
class AnsweredToolCall:
    """A tool call the agent answered itself, without an effect (a pure tool)."""

    call_id: str  # its key in the run: <task>:<attempt>:<id>
    task_id: str
    attempt: int
    provider_call_id: str  # the id the model gave it
    tool: str
    input: JsonValue  # the arguments the model sent
    output: JsonValue  # what the model received
    units: Mapping[str, int]  # its budget units (its kind's estimate): reserved, then spent


def insert_answered_txn(
    conn: Db,
    run_id: str,
    calls: Sequence[AnsweredToolCall],
    now: str,
    trace_id: str | None = None,
) -> JsonObject | None:
    """Rows for calls answered without an effect, each with its budget units; one already
    written (a resumed attempt answering it again) is kept as it is and counts nothing again.

    Returns the overrun (``{dimension, limit, attempted}`` + the refused call's ``tool`` and
    ``toolCallId``) when the budget refuses a call: recorded as exceeded, that call and those
    after it get no row."""
    for c in calls:
        if conn.execute(
            "SELECT 1 FROM tool_calls WHERE run_id = ? AND call_id = ?", (run_id, c.call_id)
        ).fetchone():
            continue
        refused = _spend_txn(conn, run_id, c, now, trace_id)
        if refused is not None:
            return refused
        conn.execute(
            "INSERT INTO tool_calls (run_id, call_id, format_version, task_id, tool, status,"
            " input_json, output_json, created_at, completed_at, attempt, provider_call_id)"
            " VALUES (?, ?, ?, ?, ?, 'succeeded', ?, ?, ?, ?, ?, ?)",
            (
                run_id,
                c.call_id,
                ROW_FORMAT_VERSION,
                c.task_id,
                c.tool,
                dumps_value(conn, redact(c.input), now),
                dumps_value(conn, redact(c.output), now),
                now,
                now,
                c.attempt,
                c.provider_call_id,
            ),
        )
    return None


def _spend_txn(
    conn: Db, run_id: str, c: AnsweredToolCall, now: str, trace_id: str | None
) -> JsonObject | None:
    """Reserve the call's units, then settle them as spent (a pure call's use is known: it
    was answered); the overrun when refused. Keyed by the call, so a repeat is a no-op."""
    reservation = f"tool-call:{c.call_id}"
    got = budget.reserve_budget_txn(
        conn, run_id, reservation, c.units, now, trace_id=trace_id, task_id=c.task_id
    )
    if not got.granted:
        return {**(got.exceeded or {}), "tool": c.tool, "toolCallId": c.call_id}
    if not got.already_recorded:
        budget.settle_budget_txn(
            conn,
            run_id,
            reservation,
            c.units,
            now,
            trace_id=trace_id,
            held=c.units,
            task_id=c.task_id,
        )
    return None


def move_held_tool_call_txn(
    conn: Db, effect_id: str, status: str, now: str, *, error: str | None = None
) -> None:
    """A held tool call (``waiting_for_approval``) moves with its approval: ``started`` when its
    approved effect starts, or ends ``rejected`` / ``cancelled``. A task-level effect has no
    tool-call row, so nothing moves for it."""
    completed = None if status == "started" else now
    conn.execute(
        "UPDATE tool_calls SET status = ?, error = ?, completed_at = ?"
        " WHERE effect_id = ? AND status = 'waiting_for_approval'",
        (status, error, completed, effect_id),
    )


def finish_tool_call_txn(
    conn: Db,
    run_id: str,
    call_id: str,
    status: str,
    now: str,
    *,
    output: JsonValue = None,
    error: str | None = None,
) -> None:
    """Finish a tool call; call it in the same transaction as ``finish_effect_txn``."""
    cur = conn.execute(
        "UPDATE tool_calls SET status = ?, output_json = ?, error = ?, completed_at = ?"
        " WHERE run_id = ? AND call_id = ? AND status = 'started'",
        (status, dumps_value_opt(conn, redact(output), now), error, now, run_id, call_id),
    )
    if cur.rowcount != 1:
        raise InvalidOperationError(f"tool call {call_id} of run {run_id} is not started")


def finish_applied_txn(conn: Db, run_id: str, effect_id: str, output: JsonValue, now: str) -> None:
    """The tool call (if any) whose effect an operator reconciled ``applied``: a row still
    ``started`` or ``uncertain`` ends ``succeeded`` with the output its model receives when
    the attempt resumes; a finished row is left as it is."""
    conn.execute(
        "UPDATE tool_calls SET status = 'succeeded', output_json = ?, error = NULL,"
        " completed_at = ? WHERE run_id = ? AND effect_id = ?"
        " AND status IN ('started', 'uncertain')",
        (dumps_value_opt(conn, redact(output), now), now, run_id, effect_id),
    )


@dataclass(frozen=True)
class ToolCallRecord:
    """One tool call of an agent, finished with its effect."""

    call_id: str
    task_id: str
    effect_id: str | None
    tool: str
    status: str
    input: JsonValue
    output: JsonValue
    error: str | None
    attempt: int | None = None
    provider_call_id: str | None = None  # None: recorded before v16 (only ``call_id``)

    def to_json(self) -> JsonObject:
        # ``callId`` is the id the model gave the call, as the original shows it (its answer
        # and the next turn's tool result carry it); taskId + attempt + callId is unique.
        return {
            "callId": self.provider_call_id or self.call_id,
            "taskId": self.task_id,
            "attempt": self.attempt,
            "effectId": self.effect_id,
            "tool": self.tool,
            "status": self.status,
            "input": self.input,
            "output": self.output,
            "error": self.error,
        }


def list_tool_calls(conn: Db, run_id: str) -> list[ToolCallRecord]:
    sql = "SELECT * FROM tool_calls WHERE run_id = ? ORDER BY created_at, call_id"
    return [
        ToolCallRecord(
            call_id=r["call_id"],
            task_id=r["task_id"],
            effect_id=r["effect_id"],
            tool=r["tool"],
            status=r["status"],
            input=loads_value(conn, r["input_json"]),
            output=loads_value(conn, r["output_json"]),
            error=r["error"],
            attempt=r["attempt"],
            provider_call_id=r["provider_call_id"],
        )
        for r in fetch_all(conn, sql, (run_id,), "tool call")
    ]
