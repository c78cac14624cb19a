"""The frozen values that cross the ledger interface (``RunLedger``): requests and snapshots.

Each protocol step of ``interface.RunLedger`` takes one of these (or a few plain values) and
returns a record or a snapshot; nothing here knows about SQL, so a second backend implements
the same steps over the same values.

Invariants:
- every value is immutable (``frozen=True``); sequences are tuples or caller-owned sequences
  the ledger only reads;
- JSON payloads are ``JsonValue``/``JsonObject``: exactly what the ledger can store and return;
- timestamps (``now``) come from the coordinator's injected clock, never from the ledger.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentctl.core.frozen import direct_init
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.longterm import EmbeddingIdentity, Entry
from agentctl.ledger.artifacts.refs import ArtifactRefRecord
from agentctl.ledger.effects import EffectRecord, NewEffect
from agentctl.ledger.reconcile import ReconciliationRecord
from agentctl.ledger.remote import RemoteHandleRecord
from agentctl.ledger.runs import NewRun, RunHead, RunRecord
from agentctl.ledger.sessions import ModelCallStart, ProviderTurn
from agentctl.ledger.tasks import AuditSpec, LiveTask, TaskCompletion, TaskRecord
from agentctl.ledger.tool_calls import AnsweredToolCall

# Evidence appears in signatures only: its models load with the remote-protocol effects.
if TYPE_CHECKING:
    from agentctl.core.protocols import ProtocolEvidence


@dataclass(frozen=True)
class Owner:
    """The process that leases a run: pid plus process start time (pid reuse is detected)."""

    pid: int
    create_time: float


# ------------------------------------------------------------------------- run lifecycle


@dataclass(frozen=True)
class DerivedRun:
    """A run materialised from another one (retry, repair, replay) in one transaction.

    Order: create the run; append ``events`` (run-level audit: the decision the rest follows
    from); for each completion, walk the task through its legal intermediate states when
    ``walk`` is set (each step audited and checkpointed, as a replay shows them); commit the
    completions with ``working_memory``; move the run to ``final_state`` if given; copy
    ``stream_source``'s stream events; take the lease if ``owner`` is given.
    """

    run: NewRun
    task_order: tuple[str, ...]
    completions: tuple[TaskCompletion, ...]
    working_memory: JsonValue
    now: str
    walk: bool = False
    events: tuple[AuditSpec, ...] = ()
    final_state: str | None = None
    final_output: JsonValue = None
    owner: Owner | None = None
    # Recorded replay: copy this run's stream events, linked to their source rows.
    stream_source: str | None = None


@dataclass(frozen=True)
class UnsentEffect:
    """A started effect a stop cut before its request left its worker (the worker said so),
    with that answer's error: it did not happen."""

    effect_id: str
    error: str


@dataclass(frozen=True)
class CancelRun:
    """Stop a run durably: started effects → uncertain, ``cancel_tasks`` → cancelled.

    ``reason`` (wall time exceeded) is audited as ``budget.exceeded`` before the run moves to
    ``state``; the lease held by ``pid`` is released in the same transaction. ``state``
    ``running`` keeps the run's state (a stopping ``serve`` hands the run back to the queue).
    ``trace_id``: the stopping drive's, named by every event written here. ``unsent``: the
    started effects whose worker said the stop cut them before their request left it: they
    end ``cancelled`` (nothing happened), not uncertain — in a run handed back, their
    reservations given back and their tasks ``retry_scheduled`` (``ledger.lost``).
    """

    run_id: str
    state: str
    now: str
    pid: int
    cancel_tasks: tuple[str, ...]
    reason: str | None = None
    trace_id: str | None = None
    unsent: tuple[UnsentEffect, ...] = ()


@dataclass(frozen=True)
class SettleRun:
    """End a drive: cancel ``never_started`` tasks, move the run to ``state`` (unless it stays
    ``running``) with ``output``, and release the lease held by ``pid``; the events name
    ``trace_id``, the ending drive's."""

    run_id: str
    state: str
    output: JsonValue
    now: str
    pid: int
    never_started: tuple[str, ...] = ()
    trace_id: str | None = None


@dataclass(frozen=True)
class InflightEffect:
    """The latest effect of a task found mid-flight, with its latest reconciliation."""

    task_id: str
    effect: EffectRecord
    reconciliation: ReconciliationRecord | None
    remote: RemoteHandleRecord | None = None  # the remote work it started, if any


@dataclass(frozen=True)
class LiveState:
    """What a coordinator needs to (re)start driving a run, read as one snapshot."""

    inputs: JsonObject
    working_memory: JsonObject
    tasks: tuple[LiveTask, ...]  # outputs stay in the ledger: ``RunLedger.read_outputs``
    inflight: tuple[InflightEffect, ...]


@dataclass(frozen=True)
class OpenCompensationTask:
    """A task of a compensation run sourced from a snapshot's run whose inverse is not
    settled: the run has not ended (queued, running or paused: the inverse may still run),
    or it ended with the inverse's effect possibly done (``effect_id``, ``effect_status``:
    ``uncertain`` — started or uncertain, never reconciled — or ``applied``, reconciled so
    while its source effects carry no ``compensated``)."""

    run_id: str  # the compensation run
    task_id: str  # a compensation task id (``<source task>--compensate``)
    state: str  # that task's state
    effect_id: str | None = None
    effect_status: str | None = None


@dataclass(frozen=True)
class SourceSnapshot:
    """A run as recovery, replay and fork read it: one consistent snapshot."""

    run: RunRecord
    tasks: tuple[TaskRecord, ...]
    effects: tuple[EffectRecord, ...]
    reconciliations: tuple[ReconciliationRecord, ...]
    artifacts: tuple[ArtifactRefRecord, ...]
    # A live process holds the run's lease at the snapshot (``leases.has_live_owner``): a run
    # being driven is no recovery source, whatever its tasks look like.
    driven: bool
    # The tasks of its compensation runs that have not ended, oldest run first: the planner
    # must not plan again an inverse one of them still holds.
    open_compensations: tuple[OpenCompensationTask, ...] = ()


# ------------------------------------------------------------------------- protocol steps


@dataclass(frozen=True)
class RequestRow:
    """One task of a batch moving to running with its effect ``requested`` (DESIGN.md §3.1)."""

    task_id: str
    from_state: str
    attempt: int
    effect: NewEffect
    budget: Mapping[str, int]
    approval_reason: str | None = None  # set when policy requires an approval first
    # The name the policy judged (``filesystem.write``, ``process.exec``…), which its approval
    # shows as its capability, as an agent's tool approval does; else the effect's operation.
    capability: str | None = None


@dataclass(frozen=True)
class RequestBatch:
    """A batch's fresh effects to record; ``after`` is the previous batch's completions (and
    its deferred outcome), committed first in the same transaction (the pipelined commit)."""

    run_id: str
    rows: Sequence[RequestRow]
    now: str
    trace_id: str
    after: BatchCommit | None = None


@dataclass(frozen=True)
class BudgetDenial:
    """A task of a ``RequestBatch`` whose reservation the budget refused: nothing was recorded
    for it but the overrun — which dimension, its limit, what the reservation would reach."""

    task_id: str
    dimension: str
    limit: int | None
    attempted: int | None

    @classmethod
    def of(cls, task_id: str, exceeded: JsonObject | None) -> BudgetDenial:
        """From the budget's ``{dimension, limit, attempted}`` record (None: not known)."""
        found = exceeded or {}

        def number(key: str) -> int | None:
            value = found.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else None

        return cls(
            task_id, str(found.get("dimension", "unknown")), number("limit"), number("attempted")
        )

    def described(self) -> str:
        """``providerRequests (limit 1, would reach 2)``; only what the budget recorded."""
        shown = [] if self.limit is None else [f"limit {self.limit}"]
        shown += [] if self.attempted is None else [f"would reach {self.attempted}"]
        return f"{self.dimension} ({', '.join(shown)})" if shown else self.dimension


@dataclass(frozen=True)
class TaskStart:
    """A task that records its own effects as it goes (an agent) moving to running."""

    task_id: str
    from_state: str
    attempt: int


@dataclass(frozen=True)
class TaskStartBatch:
    """Agent tasks to running; ``after`` as in ``RequestBatch`` (committed first, same
    transaction)."""

    run_id: str
    starts: Sequence[TaskStart]
    now: str
    trace_id: str
    after: BatchCommit | None = None


@dataclass(frozen=True)
class EffectStartBatch:
    """``started`` for already-requested effects; approved tasks move back to running first."""

    run_id: str
    effect_ids: Sequence[str]
    approved_tasks: Sequence[str]
    now: str
    trace_id: str


@dataclass(frozen=True)
class CallRecord:
    """One call of an agent: reserve, record ``requested`` + ``started``, tool-call row; a model
    call (``turn``) also counts in its attempt's provider session."""

    effect: NewEffect
    reserve: Mapping[str, int]
    now: str
    tool_call_id: str | None = None
    tool: str | None = None
    turn: ProviderTurn | None = None
    provider_call_id: str | None = None  # a tool call's id as the model gave it
    tool_input: JsonValue = None  # ... and the arguments it sent (the tool-call row's input)
    # The attempt's tool calls answered without an effect since its previous record.
    answered: tuple[AnsweredToolCall, ...] = ()

    def model_call_start(self) -> ModelCallStart | None:
        """What its provider session counts as the call starts; None for a tool call."""
        if self.turn is None:
            return None
        new = self.effect
        return ModelCallStart(
            new.run_id, new.task_id, new.attempt, new.effect_id, new.request, self.turn
        )


@dataclass(frozen=True)
class MemoryPut:
    """A long-term memory write (with its effect's outcome, or from ``agentctl memory put``).

    ``vector`` is the entry's embedding under ``embedding``; ``retention_days`` sets its
    expiry from the commit time (None: it never expires).
    """

    namespace: str
    key: str
    entry: Entry
    embedding: EmbeddingIdentity | None = None
    vector: tuple[float, ...] | None = None
    retention_days: int | None = None


@dataclass(frozen=True)
class EffectOutcome:
    """An effect's outcome: status, budget settlement, memory write and tool-call finish.

    ``spent`` settles the effect's reservation (None: nothing was reserved);
    ``tool_call_id`` finishes the tool-call row recorded with the effect, with ``tool_output``
    (the output the model was given) when set, else ``result``; ``model_call`` settles the
    call in its attempt's provider session; ``protocol`` is the wire evidence of a
    remote-protocol effect (MCP, A2A), stored with the outcome.
    """

    run_id: str
    effect_id: str
    status: str  # succeeded | failed | uncertain
    now: str
    result: JsonValue = None
    error: str | None = None
    spent: Mapping[str, int] | None = None
    trace_id: str | None = None  # the recording drive's: its events name it
    long_term_put: MemoryPut | None = None
    tool_call_id: str | None = None
    tool_output: JsonValue = None
    model_call: bool = False
    protocol: ProtocolEvidence | None = None
    # The effect row's own task, attempt and operation, when the caller inserted that row (a
    # fresh effect step): its status UPDATE then returns no row to audit.
    task_id: str | None = None
    attempt: int = 0
    operation: str | None = None
    # What that same drive reserved for it (the reservation is the effect's, made in the
    # transaction that inserted the row): its settle needs no read back of the amounts.
    held: Mapping[str, int] | None = None


@direct_init
@dataclass(frozen=True)
class Finished(TaskCompletion):
    """A task's final (or retry) state for this batch, ready to commit: the completion the
    task table takes as it is (no copy per step), plus the state it leaves (``from_state``,
    the walk's start). Its events are the step's (``steps.commit_batch_txn``), followed by
    ``events`` (an ``artifact.not_recovered`` of a resumed write).

    ``passed``: states between ``from_state`` and ``state`` that are audited but not written
    one by one — a pure task goes ``pending`` → ``succeeded`` in its one UPDATE and its events
    still say ``ready`` and ``running`` (spec/cli.md §3: every transition is audited). Each
    must be legal after the one before, and ``state`` legal after the last (the staging
    builds them so); the UPDATE's guard is ``state``'s, which admits ``from_state``."""

    from_state: str = "running"
    passed: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompensatedPair:
    """A source effect whose inverse effect (in a compensation run) just confirmed, and the id
    of the ``compensated`` reconciliation that records it (minted by the coordinator)."""

    source_effect_id: str
    inverse_effect_id: str
    reconciliation_id: str


@dataclass(frozen=True)
class BatchCommit:
    """A batch's completions in compiled order, with memory, audit and one checkpoint.

    ``outcomes`` are effect outcomes not yet committed (a lone effect commits its outcome with
    its completion); ``memory`` replaces working memory unless None.
    """

    run_id: str
    items: Sequence[Finished]
    memory: JsonObject | None
    now: str
    trace_id: str
    compensated: Sequence[CompensatedPair] = ()
    outcomes: Sequence[EffectOutcome] = ()


@dataclass(frozen=True)
class MemoryEntry:
    """A long-term memory lookup: ``found`` is False when absent or expired."""

    found: bool
    value: JsonValue = None
    namespace: str = ""
    key: str = ""
    text: str | None = None
    metadata: JsonObject = field(default_factory=dict)
    embedding: EmbeddingIdentity | None = None  # None: not indexed for vector search
    expires_at: str | None = None
    created_at: str | None = None
    updated_at: str | None = None

    def to_json(self) -> JsonObject:
        return {
            "namespace": self.namespace,
            "key": self.key,
            "value": self.value,
            "text": self.text,
            "metadata": dict(self.metadata),
            "embedding": self.embedding.to_json() if self.embedding else None,
            "expiresAt": self.expires_at,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }


# ------------------------------------------------------------------------- operators


@dataclass(frozen=True)
class ApprovalDecision:
    """An operator's decision on one pending approval."""

    approval_id: str  # or a unique prefix of it (``approval-7e7f45``), as a run's id
    approve: bool
    actor: str
    reason: str
    now: str
    trace_id: str | None = None


@dataclass(frozen=True)
class ReconcileRequest:
    """An operator's (or a compensation run's) conclusion about one effect."""

    effect_id: str
    status: str  # applied | not_applied | compensated
    actor: str
    reason: str
    evidence: JsonValue
    result: JsonValue
    compensation_effect_id: str | None
    now: str
    reconciliation_id: str  # ``reconciliation-`` + UUIDv7, minted by the coordinator's clock
    trace_id: str | None = None
    # Why policy let it through (``core.policy.ReconcileAuthorization.to_json``) and the JSON
    # Schema the result was checked against: carried by the ``effect.reconciled`` audit event.
    authorization: JsonObject | None = None
    result_schema: JsonValue = None
    # An applied agent tool call: the output its model receives (the result as the tool's kind
    # shapes it), which finishes the call's row; None: the result itself.
    tool_output: JsonValue = None
    # A model call's price from the run's plan (``core.pricing.price_for``), which an applied
    # record's usage is settled at; None: unpriced, or not a model call.
    model_rates: Mapping[str, int] | None = None


@dataclass(frozen=True)
class IngestRequest:
    """A file a confirmed mutation wrote, to be stored and leased until its task commits;
    ``trace_id``: the drive's, named by the budget events its metering writes; ``lease_id``:
    the lease and ``artifactBytes`` reservation (one per effect and file: metered once however
    often it is asked); ``written``: the digest of the bytes a resumed write's recorded outcome
    wrote — its blob, still stored, is leased instead, else only those bytes are taken."""

    path: str
    now: str
    run_id: str
    task_id: str
    trace_id: str | None = None
    lease_id: str | None = None
    written: str | None = None


@dataclass(frozen=True)
class GcRequest:
    """Which finished runs a garbage collection removes, and whether only to count them."""

    now: str
    older_than_days: int = 30
    dry_run: bool = False


__all__ = [
    "ApprovalDecision",
    "BatchCommit",
    "CallRecord",
    "CancelRun",
    "CompensatedPair",
    "DerivedRun",
    "EffectOutcome",
    "EffectStartBatch",
    "Finished",
    "GcRequest",
    "InflightEffect",
    "IngestRequest",
    "LiveState",
    "MemoryEntry",
    "MemoryPut",
    "Owner",
    "ReconcileRequest",
    "RequestBatch",
    "RequestRow",
    "ResumeClaim",
    "SettleRun",
    "SourceSnapshot",
    "TaskStart",
    "TaskStartBatch",
]


@dataclass(frozen=True)
class ProtocolReport:
    """Protocol evidence of one effect, reported apart from its outcome (e.g. mid-effect)."""

    effect_id: str
    evidence: ProtocolEvidence
    now: str


@dataclass(frozen=True)
class ResumeClaim:
    """What a resume's claim found: the run and the unresolved effects that refuse it (when
    there are any, the lease was not taken and the run row is as it was)."""

    run: RunHead
    unresolved: tuple[EffectRecord, ...]
