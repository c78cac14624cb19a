"""Where one task stands within one batch: a small state machine of frozen values.

The driver moves every task of a batch through these states, one protocol step at a time,
and each step returns *new* values instead of flipping flags on a shared object:

    prepare ─┬─> Settled                       (pure work, skips, failures before any effect)
             ├─> PendingEffect ── record ──┬─> StartedEffect ── execute ──> Settled
             │   (recorded=False)          ├─> HeldForApproval              (the run pauses)
             │                             └─> Settled                     (budget refused)
             ├─> PendingEffect ── start ───> StartedEffect                 (resumed: row exists)
             └─> PendingAgent ─── start ───> RunningAgent ── run ──┬─────> Settled
                                                                   └─> AgentHeld
                                                  (a tool call held for approval: paused)

Invariants:
- an effect is executed only from ``StartedEffect``, which the driver creates only after the
  ``started`` row committed (DESIGN.md §3);
- ``Settled`` is the only state that commits a task's completion; ``HeldForApproval`` commits
  nothing more (its pause committed with the request);
- ``Settled.outcome`` is an effect outcome not yet durable: it commits in the same transaction
  as the task's completion (a batch of one effect), so it is never lost and never committed
  twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentctl.core.frozen import direct_init
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.plan import PlannedTask
from agentctl.core.policy import Decision
from agentctl.ledger.artifacts.refs import ArtifactRef
from agentctl.ledger.audit import PolicyVerdict
from agentctl.ledger.model import EffectOutcome
from agentctl.ledger.tasks import AuditSpec
from agentctl.ledger.tool_calls import AnsweredToolCall


def verdict(decision: Decision) -> PolicyVerdict:
    """The policy's decision as the ledger audits it with the effect's request."""
    return PolicyVerdict(str(decision.kind), decision.reason)


@dataclass(frozen=True)
class EffectPlan:
    """An effect about to be recorded and dispatched, decided by ``prepare``."""

    effect_id: str
    operation: str
    effect_class: str
    risk: str
    idempotency: str
    recorded_input: JsonObject  # what the ledger stores (secret-free)
    request: JsonObject  # what the executor gets (may carry resolved secret values)
    timeout_s: float
    approval_reason: str | None  # set when policy requires an approval first
    in_process: bool  # executed by the coordinator (state it owns), not by a worker
    secrets: tuple[str, ...] = ()  # resolved values, redacted from everything recorded
    budget: dict[str, int] = field(default_factory=dict)
    policy: PolicyVerdict | None = None  # the decision that let it be requested (audited)
    input_digest: str | None = None  # of ``recorded_input``, the one ``effect_id`` covers
    recorded_text: str | None = None  # the canonical JSON that digest hashed (stored as is)

    @property
    def needs_approval(self) -> bool:
        return self.approval_reason is not None


@dataclass(frozen=True)
class WrittenFile:
    """The file a confirmed ``builtin.write`` wrote, as its recorded outcome says: found on
    resume, its reference is recovered for the task's completion (``ingest.Ingester``)."""

    path: str
    content: str


@direct_init
@dataclass(frozen=True)
class Settled:
    """A task's result for this batch is known and ready to commit in compiled order."""

    task: PlannedTask
    attempt: int
    state: str  # succeeded | failed | skipped | waiting_for_effect
    output: JsonValue = None
    error: str | None = None
    decision: JsonObject | None = None
    input_digest: str | None = None
    retryable: bool = False
    memory_delta: JsonObject | None = None
    artifacts: tuple[ArtifactRef, ...] = ()
    lease_ids: tuple[str, ...] = ()
    effect_id: str | None = None  # the effect that produced it, if any
    outcome: EffectOutcome | None = None  # an outcome that commits with the completion
    stops_run: bool = False  # failed for want of disk space: retry after resume, stop now
    # An agent's tool calls answered without an effect that none of its calls recorded.
    answered: tuple[AnsweredToolCall, ...] = ()
    # A resumed task's confirmed write: its file's reference is recovered before staging.
    written: WrittenFile | None = None
    events: tuple[AuditSpec, ...] = ()  # audited after its completion's own transition


@dataclass(frozen=True)
class PendingEffect:
    """An effect decided but not started: fresh (no row yet) or resumed (row recorded)."""

    task: PlannedTask
    attempt: int
    effect: EffectPlan
    decision: JsonObject | None = None
    input_digest: str | None = None
    recorded: bool = False


@dataclass(frozen=True)
class StartedEffect:
    """``started`` is durable: the effect may now be executed, exactly once."""

    task: PlannedTask
    attempt: int
    effect: EffectPlan
    decision: JsonObject | None = None
    input_digest: str | None = None
    # Its effect row was inserted by this drive, so the row's audit columns are this step's
    # (a row recorded by an earlier drive carries that drive's trace).
    fresh: bool = False


@dataclass(frozen=True)
class HeldForApproval:
    """Recorded and paused: an operator must approve or reject before it can start."""

    task: PlannedTask
    attempt: int
    effect: EffectPlan


@dataclass(frozen=True)
class PendingAgent:
    """An agent attempt about to run: fresh, or resumed (its confirmed calls are reused)."""

    task: PlannedTask
    attempt: int
    prompt: str
    instructions: str  # the agent's instructions, rendered for this task
    decision: JsonObject | None = None
    input_digest: str | None = None
    recorded: bool = False


@dataclass(frozen=True)
class RunningAgent:
    """The agent task is durably running; its loop records each call as its own effect."""

    task: PlannedTask
    attempt: int
    prompt: str
    instructions: str
    decision: JsonObject | None = None
    input_digest: str | None = None


@dataclass(frozen=True)
class AgentHeld:
    """The agent's loop stopped at a tool call held for approval; the hold is durable (task
    ``waiting_for_approval``), so nothing more commits until ``resume`` re-enters the loop."""

    task: PlannedTask
    attempt: int


Prepared = Settled | PendingEffect | PendingAgent
Step = (
    Settled
    | PendingEffect
    | StartedEffect
    | HeldForApproval
    | PendingAgent
    | RunningAgent
    | AgentHeld
)
Executable = StartedEffect | RunningAgent


def started(step: PendingEffect) -> StartedEffect:
    """The transition a committed ``started`` row allows."""
    fresh = not step.recorded
    return StartedEffect(
        step.task, step.attempt, step.effect, step.decision, step.input_digest, fresh
    )


def running(step: PendingAgent) -> RunningAgent:
    """The transition a committed ``running`` task row allows."""
    return RunningAgent(
        step.task, step.attempt, step.prompt, step.instructions, step.decision, step.input_digest
    )
