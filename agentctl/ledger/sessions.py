"""Provider sessions: one per agent task attempt, the conversation its model calls carry on.

``inspect`` lists them (``providerSessions``): which provider and model an attempt talked to,
how far the conversation got, how many model calls it took and the usage they reported.

Invariants:
- a session's id is ``<run>:<task>:<attempt>``: the attempt's first model call creates the
  row and each later one updates it, so a resumed attempt (its confirmed calls reused, never
  sent again) cannot add a second row, and a new attempt (a retry) gets its own;
- rows are written only inside transactions that already commit a model call's ``started``
  (``open_call_txn``) or its outcome (``settle_txn``: the gateway's finish, recovery marking
  it uncertain, a reconciliation): never a commit of their own;
- ``calls`` counts the attempt's model calls that started; ``usage`` sums the counters their
  answers reported, each answer once (a reused answer was settled when it was first made);
- ``status``: ``running`` while a call is in flight, ``active`` after an answer asking for
  tools, ``completed`` after a final answer (``finish`` says which: complete, max_tokens,
  refusal), ``failed`` / ``uncertain`` when the latest call failed / its outcome is unknown;
- when the attempt ends (its task fails, is rescheduled or cancelled: ``end_attempt_txn``, in
  the transaction that commits that end) a session still open (running, active, uncertain)
  ends ``failed`` or ``cancelled``; an outcome settled after that (a late reconciliation)
  adds its finish and usage but never reopens it;
- ``continuation`` (``state_json``, sealed in an encrypted ledger): agentctl resends the whole
  conversation on every turn and keeps no provider-side state, so it names the latest model
  call, whose recorded input holds that conversation: ``{kind, effectId, messages}``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from agentctl.core.jsonvalue import JsonObject, JsonValue, as_object
from agentctl.core.pricing import add_token_counts
from agentctl.ledger.rows import ROW_FORMAT_VERSION, dumps, fetch_all, loads_counts, loads_opt
from agentctl.ledger.sql import Db


@dataclass(frozen=True)
class ProviderTurn:
    """The provider a model call goes to: what its attempt's session records."""

    provider: str  # the spec.providers key
    kind: str  # the provider's kind (fake, openai, ...)
    model: str | None


@dataclass(frozen=True)
class ModelCallStart:
    """One model call starting: its effect row and the session it belongs to."""

    run_id: str
    task_id: str
    attempt: int
    effect_id: str
    request: JsonValue  # the call's recorded input (its conversation)
    turn: ProviderTurn


_OPEN = (
    "INSERT INTO provider_sessions (session_id, format_version, run_id, task_id, attempt,"
    " provider, provider_kind, model, state_json, status, calls, last_effect_id, created_at,"
    " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', 1, ?, ?, ?)"
    " ON CONFLICT (session_id) DO UPDATE SET calls = provider_sessions.calls + 1,"
    " status = 'running', state_json = excluded.state_json,"
    " last_effect_id = excluded.last_effect_id, updated_at = excluded.updated_at"
)


def session_id(run_id: str, task_id: str, attempt: int) -> str:
    return f"{run_id}:{task_id}:{attempt}"


def open_call_txn(conn: Db, call: ModelCallStart, now: str) -> None:
    """Count one more model call of the attempt (creating its session with the first)."""
    messages = as_object(call.request).get("messages")
    continuation = {
        "kind": "conversation",
        "effectId": call.effect_id,
        "messages": len(messages) if isinstance(messages, list) else 0,
    }
    turn = call.turn
    conn.execute(
        _OPEN,
        (
            session_id(call.run_id, call.task_id, call.attempt),
            ROW_FORMAT_VERSION,
            call.run_id,
            call.task_id,
            call.attempt,
            turn.provider,
            turn.kind,
            turn.model,
            dumps(continuation),
            call.effect_id,
            now,
            now,
        ),
    )


# A session's statuses while its latest model call is in flight or unknown: its outcome sets
# the status then; once the attempt has ended (any other status) it only adds to the record.
_AWAITING = ("running", "uncertain")
# The statuses an answer sets while the attempt runs (``settle_txn``).
_SETTLED_BY_ANSWER = ("active", "completed")
# The status a session still open ends in, by the state its task's attempt ends in.
_ENDS = {"failed": "failed", "retry_scheduled": "failed", "cancelled": "cancelled"}
_END_OPEN = (
    "UPDATE provider_sessions SET status = ?, updated_at = ?"
    " WHERE {where} AND status IN ('running', 'active', 'uncertain')"
)


def settle_txn(
    conn: Db, effect_id: str, status: str, result: JsonValue, now: str, replaces: JsonValue = None
) -> None:
    """The outcome of the session's latest model call (``effect_id``): its status, finish and
    usage. An effect that is no session's latest call (a tool call, a task) changes nothing.
    ``replaces``: the answer an earlier ``applied`` reconciliation gave this same call, which
    ``result`` supersedes: its usage is taken back out, so the call counts once."""
    row = conn.execute(
        "SELECT session_id, status, finish, usage_json FROM provider_sessions"
        " WHERE last_effect_id = ?",
        (effect_id,),
    ).fetchone()
    if row is None:
        return
    finish, usage = row["finish"], loads_counts(row["usage_json"])
    if status == "succeeded":
        reply = as_object(result)
        finish = str(reply.get("finish") or "complete")
        status = "active" if finish == "tool_calls" else "completed"
        add_token_counts(usage, as_object(reply.get("usage") or {}))
        superseded = as_object(as_object(replaces).get("usage") or {})
        add_token_counts(usage, superseded, sign=-1)
    # The attempt ended first: it stays as it ended. A superseding answer of the same call
    # also replaces the status the earlier one set (its finish may differ).
    open_statuses = _AWAITING if replaces is None else (*_AWAITING, *_SETTLED_BY_ANSWER)
    if row["status"] not in open_statuses:
        status = row["status"]
    conn.execute(
        "UPDATE provider_sessions SET status = ?, finish = ?, usage_json = ?, updated_at = ?"
        " WHERE session_id = ?",
        (status, finish, dumps(usage), now, row["session_id"]),
    )


def end_attempt_txn(
    conn: Db, run_id: str, task_id: str, task_state: str, now: str, attempt: int | None = None
) -> None:
    """A task's attempt ended in ``task_state``: its session, if still open, ends with it.

    ``attempt`` None: the task's open session whatever its attempt (a task has at most one,
    its current attempt's; the cancellation paths that call so do not know the attempt).
    Other task states (succeeded: its session completed with the final answer; a pause)
    change nothing."""
    status = _ENDS.get(task_state)
    if status is None:
        return
    key: tuple[str, ...]
    if attempt is None:
        where, key = "run_id = ? AND task_id = ?", (run_id, task_id)
    else:
        where, key = "session_id = ?", (session_id(run_id, task_id, attempt),)
    conn.execute(_END_OPEN.format(where=where), (status, now, *key))


def settle_many_txn(conn: Db, effect_ids: Iterable[str], status: str, now: str) -> None:
    """Effects settled without an answer (recovery: ``uncertain``)."""
    for effect_id in effect_ids:
        settle_txn(conn, effect_id, status, None, now)


@dataclass(frozen=True)
class ProviderSessionRecord:
    """One agent task attempt's provider session, as ``inspect`` shows it (its fields in
    order, camelCased)."""

    session_id: str
    run_id: str
    task_id: str
    attempt: int
    provider: str
    provider_kind: str | None
    model: str | None
    status: str
    finish: str | None
    calls: int
    usage: dict[str, int]
    continuation: JsonValue
    format_version: int
    created_at: str
    updated_at: str

    def to_json(self) -> JsonObject:
        return {_camel(f.name): getattr(self, f.name) for f in dataclasses.fields(self)}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


# The record's fields read as they are stored (the others are decoded from JSON columns).
_PLAIN = tuple(
    f.name
    for f in dataclasses.fields(ProviderSessionRecord)
    if f.name not in ("usage", "continuation")
)


def list_provider_sessions(conn: Db, run_id: str) -> list[ProviderSessionRecord]:
    """A run's provider sessions, in the order their first model calls started."""
    sql = "SELECT * FROM provider_sessions WHERE run_id = ? ORDER BY created_at, session_id"
    return [
        ProviderSessionRecord(
            **{name: r[name] for name in _PLAIN},
            usage=loads_counts(r["usage_json"]),
            continuation=loads_opt(r["state_json"]),
        )
        for r in fetch_all(conn, sql, (run_id,), "provider session")
    ]
