"""The effect protocol for one agent call: reuse, or record + start, dispatch, finish.

An agent's loop (``agent.py``) decides *what* to call; this gateway is the only way it reaches
the ledger and the workers, one call at a time, under the same protocol as a task's effect.

Invariants:
- a call whose effect already succeeded (or was reconciled ``applied``) returns the recorded
  result and is never sent again; identity is (run, task, attempt, ordinal, operation, input);
- a call is dispatched only after its ``requested`` + ``started`` rows (with its budget
  reservation and tool-call row) committed; a refused reservation records no effect;
- its outcome commits at once with the budget settlement and the tool-call row's finish;
  a lost answer (timeout, transport loss, worker death) leaves it ``uncertain`` and raises
  ``AgentUncertain``: model calls are at-most-once, never resent automatically;
- the secret values a call's request carries (``AgentCall.secrets``) are redacted from its
  answer (and from each streamed fragment) before anything is recorded or returned; a model
  call settles the usage its answer reported (``modelcalls.model_spent``), priced by
  ``AgentCall.rates``;
- a call that needs an approval goes through ``RunLedger.gate_call`` instead: held (raises
  ``AgentAwaitingApproval``; the task and run pause), started once approved (then dispatched
  like any call, exactly once), or rejected (the task fails, saying so), or — a new call
  when nobody can be asked and ``nonInteractive`` denies — denied, with nothing recorded;
- a call whose ordinal the attempt already recorded under another identity (on resume, a secret
  it sends resolves to another value) is refused with ``RecordedCallChanged``: nothing is sent
  or recorded (one effect per ordinal), and the driver leaves the run paused;
- except a call recorded under a legacy name of its operation (a model call's ``model.<kind>``
  from a ledger written before model calls were named by the kind alone; the registry says
  which names are one operation's) whose identity under that name is the recorded one: it is
  that effect, and goes on under its recorded name (reused, approved, reconciled; never sent
  again because its name changed); the attempt's new calls take the current name;
- a call already recorded is never judged by ``nonInteractive`` again (it was decided when
  recorded): its recorded result, hold or approval stands;
- a pure tool's call reaches the gateway only when it needs an approval (otherwise the loop
  answers it without an effect): held like any call, and once approved and started it is
  answered here (``AgentCall.pure``: its arguments, as ``builtin.echo`` answers), its outcome
  committed with its tool-call row and budget settlement — no worker, nothing sent;
- a refused reservation names what it refused: the call, or a pure tool call it carried.
- a streaming model call (``stream: true``) dispatches with a ``FragmentKeeper``: each delta is
  a durable stream event before the worker reads on; the call's outcome is unchanged by it;
- the files a succeeded tool call wrote are ingested (``ingest.Ingester``, the path actions
  take) before its outcome commits, and kept per attempt until the driver takes them for the
  task's completion (``take_ingested``); one over ``maxArtifactBytes`` fails the task once the
  call's outcome (succeeded: the write happened) committed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from agentctl.coordinator.clock import Clock
from agentctl.coordinator.ingest import Ingested, Ingester, written_file
from agentctl.coordinator.modelcalls import model_spent
from agentctl.coordinator.poolref import workers
from agentctl.coordinator.store import Store
from agentctl.coordinator.streaming import FragmentKeeper, StreamListener
from agentctl.core import registry
from agentctl.core.effects import effect_id, input_digest
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.operations import RunContext
from agentctl.core.redact import PieceRedaction, Redactor
from agentctl.crashpoints import CrashPoint, crash_point
from agentctl.errors import PolicyDeniedError, RunFailedError
from agentctl.ledger.audit import PolicyVerdict
from agentctl.ledger.budget import BudgetRefusedError
from agentctl.ledger.effects import EffectRecord, NewEffect
from agentctl.ledger.held_calls import GatedCall
from agentctl.ledger.model import CallRecord, EffectOutcome
from agentctl.ledger.sessions import ProviderTurn
from agentctl.ledger.tool_calls import AnsweredToolCall

if TYPE_CHECKING:  # a pure run imports neither the pool nor its wire (``poolref``)
    from agentctl.coordinator.workerpool import WorkerPool
    from agentctl.mailbox.messages import Failure, Result


class AgentUncertain(Exception):
    """A call's outcome is unknown; the driver parks the task as waiting_for_effect."""


class AgentAwaitingApproval(Exception):
    """A tool call is held for an approval (durably); the driver leaves the task paused."""


class RecordedCallChanged(Exception):
    """A call this attempt already recorded comes out with another identity on resume (a
    secret it sends resolves to another value); nothing was sent, and the driver stops the
    drive and leaves the run paused: resumed as recorded, the call is reused."""


@dataclass(frozen=True)
class AgentCall:
    """One effect of an agent attempt: what is recorded and what the executor is sent."""

    task_id: str
    attempt: int
    ordinal: int  # numbers the calls of one attempt, in order
    operation: str
    recorded: JsonObject  # the effect's recorded input (its identity)
    request: JsonObject
    effect_class: str
    risk: str
    idempotency: str
    reserve: dict[str, int]
    timeout_s: float
    tool_call_id: str | None = None  # a tool call's key in the run: <task>:<attempt>:<id>
    provider_call_id: str | None = None  # ... and its id as the model gave it
    tool: str | None = None
    arguments: JsonValue = None  # a tool call's arguments as the model sent them
    # The attempt's tool calls answered without an effect since its previous call.
    answered: tuple[AnsweredToolCall, ...] = ()
    approval_reason: str | None = None  # set when policy wants an approval first
    # ... and nobody can be asked: ``nonInteractive``'s denial, for a call not yet recorded
    unattended_denial: str | None = None
    policy: PolicyVerdict | None = None  # the decision that let it be requested (audited)
    agent: str | None = None  # the spec.agents key making the call
    capability: str | None = None
    # Resolved secret values ``request`` carries (``modelcalls.resolve_secret_refs``; the
    # recorded input keeps their source and digest): redacted from whatever is recorded.
    secrets: tuple[str, ...] = ()
    # A model call's price (``core.pricing.price_for``); None: unpriced.
    rates: Mapping[str, int] | None = None
    turn: ProviderTurn | None = None  # a model call's provider (its attempt's session)
    # A tool call's executor result → the output the model is given (the registry's shape).
    shape: Callable[[Mapping[str, JsonValue]], JsonValue] | None = None
    # A pure tool's call held for an approval: once started, answered here with its arguments.
    pure: bool = False

    @property
    def is_model_call(self) -> bool:
        return registry.is_model(self.operation)

    @property
    def named(self) -> str:
        """The call as messages name it: a model call by its provider kind, said to be one
        (a bare ``fake: HTTP 503`` reads as nothing), any other by its operation."""
        kind = registry.provider_kind(self.operation)
        return self.operation if kind is None else f"model call {kind}"

    @property
    def asked(self) -> str:
        """The call as its approval names it: ``tool call ID (TOOL)`` or ``model call KIND``."""
        if self.is_model_call:
            return self.named
        return f"tool call {self.tool_call_id} ({self.tool})"

    def unattended_error(self) -> PolicyDeniedError:
        """``nonInteractive``'s denial of this call, worded as the policy's own denials."""
        what = "model call" if self.is_model_call else f"tool {self.tool}"
        return PolicyDeniedError(f"{what} denied: {self.unattended_denial}")

    def shaped(self, result: JsonValue) -> JsonValue:
        """What the model receives for this call's result (the result itself when unshaped)."""
        if self.shape is None or not isinstance(result, dict):
            return result
        return self.shape(result)


@dataclass
class CallGateway:
    """The driver's side of the narrow interface an agent loop talks through."""

    store: Store
    pool: WorkerPool | None
    clock: Clock
    run_id: str
    trace_id: str
    context: RunContext
    ingester: Ingester  # stores what tool calls write, as it does for actions
    # A provider's call counter is shared by every task using it (the fake provider's
    # scripted failures count per provider instance, spec/dsl.md §5).
    counters: dict[str, int] = field(default_factory=dict)
    on_stream: StreamListener | None = None  # shown each persisted stream event, live
    # What each running attempt's tool calls stored so far, by (task, attempt).
    ingested: dict[tuple[str, int], Ingested] = field(default_factory=dict)
    # Attempts with no recorded call past those reused: their next calls are new (one look).
    unrecorded: set[tuple[str, int]] = field(default_factory=set)

    def next_call_number(self, provider: str) -> int:
        self.counters[provider] = self.counters.get(provider, 0) + 1
        return self.counters[provider]

    def _identity(self, call: AgentCall) -> str:
        digest = input_digest(call.recorded)
        return effect_id(
            self.run_id, call.task_id, call.attempt, call.ordinal, call.operation, digest
        )

    async def perform(self, call: AgentCall) -> JsonValue:
        """The call's result: reused when already confirmed, else executed exactly once."""
        eid = self._identity(call)
        reused = await self.store.recorded_result(eid)
        if reused is not None:
            await self._recover(call, eid, reused)
            return reused
        recorded = await self._refuse_changed(call, eid)
        if recorded is not None:  # recorded under a legacy name: that effect is this call
            return await self.perform(recorded)
        new = self._new_effect(call)
        record = CallRecord(
            new,
            call.reserve,
            self.clock.now(),
            call.tool_call_id,
            call.tool,
            turn=call.turn,
            provider_call_id=call.provider_call_id,
            tool_input=call.arguments,
            answered=call.answered,
        )
        if call.approval_reason is not None:
            await self._gate(record, call)
        else:
            refused = await self.store.record_and_start_call(record)
            if refused is not None:
                raise _over_budget(call, refused)
        crash_point(CrashPoint.AFTER_STARTED)
        if call.pure:
            return await self._answer(new, call)
        keeper = self._keeper(new, call) if call.request.get("stream") is True else None
        return await self._dispatch(new, call, keeper)

    async def _refuse_changed(self, call: AgentCall, eid: str) -> AgentCall | None:
        """Raise ``RecordedCallChanged`` when the attempt already recorded a call at this
        ordinal under another identity: the recorded call cannot answer this one, and a
        second effect at its place would contradict the record (nothing is sent). ``call``
        under its recorded name when that identity is a legacy name's (``_as_recorded``)."""
        key = (call.task_id, call.attempt)
        if key in self.unrecorded:
            return None
        found = await self.store.call_at(self.run_id, call.task_id, call.attempt, call.ordinal)
        if found is None:
            self.unrecorded.add(key)  # the calls after it are new too: no look for them
        if found is None or found.effect_id == eid:
            return None
        renamed = self._as_recorded(call, found)
        if renamed is not None:
            return renamed
        raise RecordedCallChanged(changed_call_message(found, call.recorded))

    def _as_recorded(self, call: AgentCall, found: EffectRecord) -> AgentCall | None:
        """``call`` named as ``found`` was, when that is another name of its operation (a
        legacy ``model.<kind>``) and gives ``found``'s identity: an effect's identity hashes
        its operation (spec/cli.md §4), so only its recorded name finds it again."""
        if found.operation == call.operation:
            return None
        if not registry.same_operation(found.operation, call.operation):
            return None
        renamed = replace(call, operation=found.operation)
        return renamed if self._identity(renamed) == found.effect_id else None

    async def _answer(self, new: NewEffect, call: AgentCall) -> JsonValue:
        """A started pure tool call's answer, its arguments, committed as its outcome (with its
        tool-call row and budget settlement) before the loop goes on with it."""
        outcome = EffectOutcome(
            self.run_id,
            new.effect_id,
            "succeeded",
            self.clock.now(),
            call.arguments,
            spent=_tool_spent(call),
            trace_id=self.trace_id,
            tool_call_id=call.tool_call_id,
            tool_output=call.arguments,
        )
        await self.store.finish_effects([outcome])
        crash_point(CrashPoint.AFTER_OUTCOME)
        return call.arguments

    def _keeper(self, new: NewEffect, call: AgentCall) -> FragmentKeeper:
        return FragmentKeeper(
            self.store,
            self.clock,
            self.run_id,
            call.task_id,
            call.attempt,
            new.effect_id,
            PieceRedaction(Redactor(call.secrets)),
            self.on_stream,
        )

    async def _gate(self, record: CallRecord, call: AgentCall) -> None:
        """Returns once the approved call is durably started; raises while it may not run."""
        gated = GatedCall(
            record,
            call.approval_reason or "",
            call.agent,
            call.capability,
            self.trace_id,
            unattended_denial=call.unattended_denial,
        )
        gate = await self.store.gate_call(gated)
        if gate.status == "started":
            return
        if gate.status == "held":
            crash_point(CrashPoint.AFTER_REQUESTED)
            raise AgentAwaitingApproval(f"{call.asked} awaits approval")
        detail = gate.detail or {}
        if gate.status == "denied":
            raise call.unattended_error()
        if gate.status == "refused":
            raise _over_budget(call, detail)
        undone = "the model was not called" if call.is_model_call else "the tool did not run"
        raise RunFailedError(
            f"{call.asked} was rejected: approval {detail.get('approvalId')} rejected by "
            f"{detail.get('resolvedBy')} ({detail.get('reason')}); {undone}"
        )

    def _new_effect(self, call: AgentCall) -> NewEffect:
        return NewEffect(
            run_id=self.run_id,
            task_id=call.task_id,
            attempt=call.attempt,
            ordinal=call.ordinal,
            operation=call.operation,
            request=call.recorded,
            effect_class=call.effect_class,
            risk=call.risk,
            idempotency=call.idempotency,
            trace_id=self.trace_id,
            policy=call.policy,
        )

    async def _dispatch(
        self,
        new: NewEffect,
        call: AgentCall,
        keeper: FragmentKeeper | None,
    ) -> JsonValue:
        from agentctl.mailbox.messages import Execute  # with the pool: an agent's call

        msg = Execute(
            effect_id=new.effect_id,
            run_id=self.run_id,
            task_id=call.task_id,
            attempt=call.attempt,
            operation=call.operation,
            request=call.request,
            timeout_seconds=call.timeout_s,
        )
        answered = await workers(self.pool).execute(msg, on_fragment=keeper)
        if keeper is not None:
            await keeper.flush()
        reply = _redacted(call, answered)
        crash_point(CrashPoint.AFTER_RESULT)
        refused = await self._ingest(call, reply, new.effect_id)
        await self.store.finish_effects([self._outcome(new, call, reply)])
        crash_point(CrashPoint.AFTER_OUTCOME)
        if refused is not None:
            raise refused
        if reply.type == "result":
            return reply.output
        if reply.uncertain:
            raise AgentUncertain(reply.error.message or "lost")
        raise RunFailedError(
            f"{call.named}: {reply.error.message}", retryable=reply.error.retryable
        )

    async def _ingest(
        self, call: AgentCall, reply: Result | Failure, eid: str
    ) -> BudgetRefusedError | None:
        """Store the files a succeeded call wrote, as an action's effect would (before its
        outcome commits, so the leases hold the blobs until the completion names them); a
        refusal over ``maxArtifactBytes`` is returned, raised once the outcome committed."""
        if reply.type != "result" or not reply.artifacts:
            return None
        try:
            files = await self.ingester.ingest(call.task_id, reply.artifacts, eid)
        except BudgetRefusedError as exc:
            return exc
        key = (call.task_id, call.attempt)
        self.ingested[key] = self.ingested.get(key, Ingested()).plus(files)
        return None

    async def _recover(self, call: AgentCall, eid: str, reused: JsonValue) -> None:
        """A reused write's file, as its call stored it before the drive that made the call
        ended without the task's completion (kept per attempt like a live call's)."""
        written = written_file(call.operation, reused)
        if written is None:
            return
        files = await self.ingester.recover(call.task_id, eid, written)
        key = (call.task_id, call.attempt)
        self.ingested[key] = self.ingested.get(key, Ingested()).plus(files)

    def take_ingested(self, task_id: str, attempt: int) -> Ingested:
        """What the attempt's tool calls stored in this drive, handed over (and forgotten
        here) for its completion to reference on success and release the leases of."""
        return self.ingested.pop((task_id, attempt), Ingested())

    def _outcome(self, new: NewEffect, call: AgentCall, reply: Result | Failure) -> EffectOutcome:
        if reply.type == "result":
            status, output, error = "succeeded", reply.output, None
        else:
            status = "uncertain" if reply.uncertain else "failed"
            output, error = None, reply.error.message
        given = call.shaped(output) if call.tool_call_id is not None else None
        return EffectOutcome(
            self.run_id,
            new.effect_id,
            status,
            self.clock.now(),
            output,
            error,
            None if status == "uncertain" else _spent(call, reply),  # (see ``_spent``)
            trace_id=self.trace_id,
            tool_call_id=call.tool_call_id,
            tool_output=given,
            model_call=call.turn is not None,
            protocol=reply.protocol,
        )


# What a model call's recorded input keeps of what it sends besides the conversation.
_SENT_SECRETS = frozenset({"credential", "headers"})


def changed_call_message(found: EffectRecord, now: JsonObject) -> str:
    """Why the call recorded as ``found`` is not the call made now (``now``: its recorded
    input as resolved in this invocation), and what the operator can do."""
    before = found.request if isinstance(found.request, dict) else {}
    changed = sorted(k for k in {*before, *now} if before.get(k) != now.get(k))
    what, run = f"its call {found.ordinal} (effect {found.effect_id})", found.run_id
    if changed and set(changed) <= _SENT_SECRETS:
        sources = _sources(before.get("credential"))
        cause = (
            "the credential or headers resolved now differ from the ones it was recorded "
            f"with{sources}"
        )
    else:
        cause = "its request now differs from the recorded one in " + ", ".join(changed)
    kept = _KEPT_WITH_SAME_KEY.get(found.status, "its recorded result is reused")
    return (
        f"{what} was recorded with another identity: {cause}; nothing was sent and the run "
        f"stays paused. Resume with the same credential ({kept}), or "
        f"go on with the new one: `agentctl cancel {run}`, `agentctl resume {run}` (ends it "
        f"cancelled), then `agentctl retry FILE {run} --from {found.task_id}`"
    )


# What resuming with the same credential does for a call held for approval, which was never
# sent and so has no recorded result to reuse.
_KEPT_WITH_SAME_KEY = {
    "waiting_for_approval": "it still waits for its approval, and is sent once approved",
    "requested": "it is sent once, as approved",
    "cancelled": "its rejected approval fails the task",
}


def _sources(credential: JsonValue) -> str:
    source = credential.get("source") if isinstance(credential, dict) else None
    return f" ({source} resolves to another value)" if isinstance(source, str) else ""


def _redacted(call: AgentCall, reply: Result | Failure) -> Result | Failure:
    """``reply`` without the call's resolved secret values (a model may echo what it saw)."""
    if not call.secrets:
        return reply
    redactor = Redactor(call.secrets)
    if reply.type == "result":
        return reply.model_copy(update={"output": redactor.redact(reply.output)})
    error = reply.error.model_copy(update={"message": redactor.redact_text(reply.error.message)})
    return reply.model_copy(update={"error": error})


def _over_budget(call: AgentCall, refused: JsonObject) -> RunFailedError:
    """The refusal of ``call``'s reservation, or of a pure tool call it carried (``tool``)."""
    tool = refused.get("tool")
    what = call.named if tool is None else f"call {refused.get('toolCallId')} of tool {tool}"
    return RunFailedError(
        f"budget {refused.get('dimension')} exceeded before {what} "
        f"(limit {refused.get('limit')}, would reach {refused.get('attempted')}); "
        "nothing was dispatched"
    )


def _spent(call: AgentCall, reply: Result | Failure) -> dict[str, int]:
    """What one call consumed, to settle its reservation; an uncertain call settles nothing
    (its spend is unknown: the reservation stays active until it is reconciled). A failed
    model call settles the usage its answer reported (none when no answer came back)."""
    if call.is_model_call:
        return model_spent(reply.usage, call.rates)
    return _tool_spent(call)


def _tool_spent(call: AgentCall) -> dict[str, int]:
    return {"toolCalls": 1} if call.tool is not None else {}  # an MCP listing is no tool call
