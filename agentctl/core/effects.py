"""Effect identity, the effect vocabulary (classes, risks, …) and the effect/reconciliation rules.

Identity (spec/cli.md §4), byte-compatible with the original:
``input_digest = sha256hex(canonical_json(input))`` and
``effect_id = sha256hex(f"{run}\\0{task}\\0{attempt}\\0{ordinal}\\0{operation}\\0{input_digest}")``
with attempt and ordinal as decimal text; ``idempotency_key == effect_id``. A new attempt or a
new run therefore always yields a new identity. Pinned vectors (also in tests/core/test_effects.py):

(run, task, attempt, ordinal, operation, input) → effect_id:

- ("run-1", "a", 1, 0, "builtin.write", {})
  → 2120d54a84fc805b473502b6d4354335f6a867e208accdddaa8344b25b501626
- ("run-1", "a", 2, 0, "builtin.write", {})
  → 46bc799165f6458c7ea0a5adb097716ed537e744d5a0be05ac7de4f2a1cb52c8
- ("run-1", "a", 1, 1, "builtin.write", {})
  → 49d77923f43bd7fe6f76dcfc096fdda7515896abbbbe26f6ce62bdbae06ca623
- ("run-2", "build", 1, 0, "process.exec", {"b": 1, "a": 2})
  → 47aa04093ee7aa3161b4642f975dbb9e901fe4742a3518036a23d6e17a52e574
- ("run-é", "t--0", 3, 7, "model.call", ["x", null])
  → 7b258d1a42a9641d9b0eb003be770185fc96b4e7226d17a7e00738c7fc0f42af

Invariants:
- What each operation is (class, risk, idempotency, policy name…) lives in
  ``agentctl.core.registry``; this module only names the vocabulary and the rules.
- Reconciliation is append-only: ``check_reconciliation`` only ever judges the *next* record
  against the effect and the records already written; it never rewrites history.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import NewType

from agentctl.core.canonical import canonical_json, json_digest, sha256_hex
from agentctl.errors import InvalidOperationError, ReconciliationConflictError

EffectId = NewType("EffectId", str)


class EffectClass(StrEnum):
    PURE = "pure"
    INTERNAL_STATE = "internal_state"
    OBSERVE = "observe"
    WORKSPACE_MUTATE = "workspace_mutate"
    EXTERNAL_MUTATE = "external_mutate"
    PROCESS_EXECUTION = "process_execution"
    NETWORK = "network"
    MODEL = "model"
    REMOTE_AGENT = "remote_agent"


class Risk(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


class Idempotency(StrEnum):
    PURE = "pure"
    IDEMPOTENT = "idempotent"
    KEYED = "keyed"
    AT_MOST_ONCE = "at_most_once"
    UNKNOWN = "unknown"


class Predictability(StrEnum):
    FULLY_PREDICTABLE = "fully_predictable"
    PARTIALLY_PREDICTABLE = "partially_predictable"
    REQUIRES_EXECUTION = "requires_execution"


class EffectStatus(StrEnum):
    REQUESTED = "requested"
    STARTED = "started"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNCERTAIN = "uncertain"
    WAITING_FOR_APPROVAL = "waiting_for_approval"
    CANCELLED = "cancelled"


class ReconciliationStatus(StrEnum):
    APPLIED = "applied"
    NOT_APPLIED = "not_applied"
    COMPENSATED = "compensated"


# --- identity ------------------------------------------------------------------------------


def input_digest(value: object) -> str:
    """Bare SHA-256 hex of the canonical JSON of an effect's input."""
    return json_digest(value)


def encoded_input(value: object) -> tuple[str, str]:
    """An effect input's canonical JSON and its ``input_digest``, from one encoding (the
    ledger stores that very text as the effect's request)."""
    text = canonical_json(value)
    return text, sha256_hex(text)


def effect_id(
    run_id: str, task_id: str, attempt: int, ordinal: int, operation: str, digest: str
) -> EffectId:
    """The effect identity; ``digest`` is ``input_digest(input)``."""
    parts = (run_id, task_id, str(attempt), str(ordinal), operation, digest)
    return EffectId(sha256_hex("\0".join(parts)))


def idempotency_key(identity: EffectId) -> str:
    """The key handed to external systems; equal to the effect id by contract."""
    return str(identity)


# The classes the `mutations` approval mode gates (spec/dsl.md §7).
MUTATION_CLASSES = frozenset(
    {
        EffectClass.WORKSPACE_MUTATE,
        EffectClass.EXTERNAL_MUTATE,
        EffectClass.PROCESS_EXECUTION,
        EffectClass.REMOTE_AGENT,
    }
)
_NON_MUTATING = frozenset({EffectClass.PURE, EffectClass.OBSERVE, EffectClass.MODEL})


def is_mutation(effect_class: str) -> bool:
    """True for the classes that need approval under ``approval: mutations``."""
    return EffectClass(effect_class) in MUTATION_CLASSES


def is_potentially_mutating(effect_class: str) -> bool:
    """True when an effect may change state and so may be compensated (spec/dsl.md §4.10)."""
    return EffectClass(effect_class) not in _NON_MUTATING


# --- effect status and reconciliation -----------------------------------------------------

_S = EffectStatus
EFFECT_TRANSITIONS: dict[EffectStatus, frozenset[EffectStatus]] = {
    # requested → failed/cancelled: refused before dispatch (budget, policy, run cancelled).
    _S.REQUESTED: frozenset({_S.STARTED, _S.FAILED, _S.CANCELLED}),
    _S.STARTED: frozenset({_S.SUCCEEDED, _S.FAILED, _S.UNCERTAIN}),
    _S.WAITING_FOR_APPROVAL: frozenset({_S.REQUESTED, _S.CANCELLED}),
    _S.SUCCEEDED: frozenset(),
    _S.FAILED: frozenset(),
    _S.UNCERTAIN: frozenset(),  # only reconciliation records, never a status change
    _S.CANCELLED: frozenset(),
}


def check_effect_transition(current: str, new: str) -> None:
    """Raise ``InvalidOperationError`` unless ``current → new`` is a legal effect transition."""
    if EffectStatus(new) not in EFFECT_TRANSITIONS[EffectStatus(current)]:
        raise InvalidOperationError(f"invalid effect transition from {current} to {new}")


def check_reconciliation(
    effect_status: str, confirmed: bool, previous_statuses: Sequence[str], new_status: str
) -> None:
    """Refuse a reconciliation record that the append-only rules of spec/cli.md §4 forbid.

    First record: applied / not_applied only for a started or uncertain effect; compensated only
    for a succeeded, confirmed one. Later records: the latest status again, or applied →
    compensated; anything else contradicts the history. These are store rules (exit 5, as an
    approval no longer pending), not a runtime check of the request (exit 4).
    """
    new = ReconciliationStatus(new_status)
    if previous_statuses:
        latest = ReconciliationStatus(previous_statuses[-1])
        if new is latest or (latest, new) == (
            ReconciliationStatus.APPLIED,
            ReconciliationStatus.COMPENSATED,
        ):
            return
        raise ReconciliationConflictError(
            f"contradictory reconciliation: effect already reconciled as {latest}, not {new}"
        )
    status = EffectStatus(effect_status)
    if new is ReconciliationStatus.COMPENSATED:
        if status is not EffectStatus.SUCCEEDED or not confirmed:
            raise ReconciliationConflictError(
                f"only a succeeded, confirmed effect can be compensated (status {status})"
            )
    elif status not in (EffectStatus.STARTED, EffectStatus.UNCERTAIN):
        raise ReconciliationConflictError(
            f"only a started or uncertain effect can be reconciled as {new} (status {status})"
        )


def is_unresolved(status: str, reconciliations: Sequence[object]) -> bool:
    """Started or uncertain with no reconciliation record: such an effect blocks resume."""
    return EffectStatus(status) in (EffectStatus.STARTED, EffectStatus.UNCERTAIN) and not (
        reconciliations
    )
