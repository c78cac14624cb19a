"""Calls of an agent turn that policy holds for an approval: hold, then start or refuse.

An agent's tool call or model call whose policy decision needs an approval (a model call
only under ``policy.approval: always``) is recorded like a task-level
effect held for approval (spec/cli.md §9), but from inside the turn loop: ``gate_call_txn`` is
the one transaction the coordinator's call gateway runs each time the loop reaches the call —
on the first run, and again on every ``resume`` that re-enters the loop.

Invariants:
- the hold commits together: budget reservation, the effect ``waiting_for_approval``, a tool
  call's row ``waiting_for_approval``, the task ``waiting_for_approval``, a pending approval
  naming the agent and the tool call (or the model call), audit and one checkpoint; nothing
  executes; a model call has no tool-call row, and its provider session counts it only once
  it starts;
- the same call reached again finds its effect by identity and never records it twice: still
  waiting → held; approved (``requested``) → ``started`` with its tool-call row (a model
  call: counted by its provider session), in this
  transaction, so the caller dispatches it exactly once; rejected (``cancelled``) → rejected,
  with the resolution (its tool-call row already ended ``rejected`` with the approval);
- a budget refusal (of the call, or of a pure tool call it carries) records the overrun and
  no effect;
- ``nonInteractive``'s denial (``GatedCall.unattended_denial``) refuses only a call with no
  effect yet, writing nothing: a call already held was decided when it was held (someone
  could be asked then), so its approval, given since, still starts it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import agentctl.ledger.approvals as approvals
import agentctl.ledger.audit as audit
import agentctl.ledger.budget as budget
import agentctl.ledger.effects as effects
import agentctl.ledger.sessions as sessions
import agentctl.ledger.tasks as tasks
import agentctl.ledger.tool_calls as tool_calls
from agentctl.core.jsonvalue import JsonObject
from agentctl.errors import InvalidOperationError, NotFoundError
from agentctl.ledger.model import CallRecord
from agentctl.ledger.sql import Db

GateStatus = Literal["held", "started", "rejected", "refused", "denied"]


@dataclass(frozen=True)
class GatedCall:
    """A tool call or model call that needs an approval before it may start."""

    call: CallRecord
    reason: str  # the policy's reason, shown with the approval
    agent: str | None  # the spec.agents key of the task
    capability: str | None
    trace_id: str | None = None
    # Nobody can be asked and the policy's ``nonInteractive`` denies: a new call is refused.
    unattended_denial: str | None = None


@dataclass(frozen=True)
class CallGate:
    """Where a gated call stands after ``gate_call_txn``."""

    status: GateStatus
    # refused: the budget overrun; rejected: {approvalId, resolvedBy, reason}
    detail: JsonObject | None = None


def gate_call_txn(conn: Db, gated: GatedCall) -> CallGate:
    """Hold the call for approval, or start it once approved, or report its rejection."""
    new, now = gated.call.effect, gated.call.now
    try:
        status = effects.get_effect(conn, new.effect_id).status
    except NotFoundError:
        if gated.unattended_denial is not None:
            return CallGate("denied")
        return _hold_txn(conn, gated)
    if status == "waiting_for_approval":
        return CallGate("held")
    if status == "requested":
        effects.start_effect_txn(conn, new.effect_id, now, trace_id=gated.trace_id)
        tool_calls.move_held_tool_call_txn(conn, new.effect_id, "started", now)
        start = gated.call.model_call_start()
        if start is not None:  # a model call: its provider session counts it from its start
            sessions.open_call_txn(conn, start, now)
        return CallGate("started")
    if status == "cancelled":
        return CallGate("rejected", _resolution(conn, new.run_id, new.effect_id))
    raise InvalidOperationError(
        f"effect {new.effect_id} is {status}; the held tool call cannot start again"
    )


def _hold_txn(conn: Db, gated: GatedCall) -> CallGate:
    call, now = gated.call, gated.call.now
    new = dataclasses.replace(call.effect, waiting_for_approval=True)
    run_id, task_id = new.run_id, new.task_id
    refused = _refusal_txn(conn, gated)
    if refused is not None:
        return CallGate("refused", refused)
    effects.insert_effect_txn(conn, new, now)
    if call.turn is None:  # a tool call's row; a model call is no tool call
        tool_calls.insert_tool_call_txn(
            conn,
            run_id,
            call.tool_call_id or new.effect_id,
            task_id,
            call.tool or "",
            call.tool_input,
            now,
            effect_id=new.effect_id,
            status="waiting_for_approval",
            attempt=new.attempt,
            provider_call_id=call.provider_call_id,
        )
    tasks.transition_task_txn(
        conn,
        run_id,
        task_id,
        "waiting_for_approval",
        now,
        attempt=new.attempt,
        trace_id=gated.trace_id,
        checkpoint=False,
    )
    approvals.insert_approval_txn(conn, _approval(gated), now)
    event = "tool_call.held" if call.turn is None else "model_call.held"
    state = {"runId": run_id, "event": event, "tasks": [{"taskId": task_id}]}
    audit.write_checkpoint_txn(conn, run_id, state, now)
    return CallGate("held")


def _refusal_txn(conn: Db, gated: GatedCall) -> JsonObject | None:
    """Reserve the pure tool calls the call carries, then the call; the overrun of the first
    the budget refuses (None: all reserved)."""
    call, trace_id = gated.call, gated.trace_id
    run_id = call.effect.run_id
    refused = tool_calls.insert_answered_txn(conn, run_id, call.answered, call.now, trace_id)
    if refused is not None:
        return refused
    new = call.effect
    reserved = budget.reserve_budget_txn(
        conn, run_id, new.effect_id, call.reserve, call.now, trace_id=trace_id, task_id=new.task_id
    )
    return None if reserved.granted else (reserved.exceeded or {})


def _approval(gated: GatedCall) -> approvals.NewApproval:
    call = gated.call
    new = call.effect
    if call.turn is not None:  # a model call: no tool, its provider named instead
        what = f"model call {call.turn.provider} ({call.turn.kind} model {call.turn.model})"
        shown: JsonObject = {"provider": call.turn.provider, "input": new.request}
        tool = None
    else:
        call_id = call.tool_call_id or new.effect_id
        tool = call.tool or ""
        what = f"tool call {call_id} ({tool})"
        shown = {"toolCallId": call_id, "tool": tool, "input": new.request}
    return approvals.NewApproval(
        run_id=new.run_id,
        task_id=new.task_id,
        effect_id=new.effect_id,
        reason=f"{what} of agent {gated.agent}: {gated.reason}",
        agent=gated.agent,
        tool=tool,
        capability=gated.capability,
        risk=new.risk,
        redacted_input=shown,
        expected_effect=new.effect_class,
        trace_id=gated.trace_id,
    )


def _resolution(conn: Db, run_id: str, effect_id: str) -> JsonObject:
    """Who rejected the call's approval and why (the newest resolution of its effect)."""
    found = [a for a in approvals.list_approvals(conn, run_id, None) if a.effect_id == effect_id]
    if not found:
        return {"approvalId": None, "resolvedBy": None, "reason": None}
    last = found[-1]
    return {
        "approvalId": last.approval_id,
        "resolvedBy": last.resolved_by,
        "reason": last.resolution_reason,
    }
