"""Effect identity vectors, the registry's action kinds and the reconciliation rules (spec/cli.md §4)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentctl.core.effects import (
    EffectClass,
    EffectStatus,
    Idempotency,
    Predictability,
    ReconciliationStatus,
    Risk,
    check_effect_transition,
    check_reconciliation,
    effect_id,
    idempotency_key,
    input_digest,
    is_mutation,
    is_potentially_mutating,
    is_unresolved,
)
from agentctl.core.registry import entries, lookup, model_operation, names
from agentctl.errors import InvalidOperationError, ReconciliationConflictError

# Computed once and pinned; the same table is in the module docstring of agentctl.core.effects.
VECTORS: list[tuple[str, str, int, int, str, Any, str]] = [
    (
        "run-1",
        "a",
        1,
        0,
        "builtin.write",
        {},
        "2120d54a84fc805b473502b6d4354335f6a867e208accdddaa8344b25b501626",
    ),
    (
        "run-1",
        "a",
        2,
        0,
        "builtin.write",
        {},
        "46bc799165f6458c7ea0a5adb097716ed537e744d5a0be05ac7de4f2a1cb52c8",
    ),
    (
        "run-1",
        "a",
        1,
        1,
        "builtin.write",
        {},
        "49d77923f43bd7fe6f76dcfc096fdda7515896abbbbe26f6ce62bdbae06ca623",
    ),
    (
        "run-2",
        "build",
        1,
        0,
        "process.exec",
        {"b": 1, "a": 2},
        "47aa04093ee7aa3161b4642f975dbb9e901fe4742a3518036a23d6e17a52e574",
    ),
    (
        "run-é",
        "t--0",
        3,
        7,
        "model.call",
        ["x", None],
        "7b258d1a42a9641d9b0eb003be770185fc96b4e7226d17a7e00738c7fc0f42af",
    ),
]


@pytest.mark.parametrize(("run", "task", "attempt", "ordinal", "op", "value", "expected"), VECTORS)
def test_pinned_effect_id_vectors(
    run: str, task: str, attempt: int, ordinal: int, op: str, value: Any, expected: str
) -> None:
    assert effect_id(run, task, attempt, ordinal, op, input_digest(value)) == expected
    assert (
        idempotency_key(effect_id(run, task, attempt, ordinal, op, input_digest(value))) == expected
    )


def test_effect_id_is_the_documented_formula() -> None:
    digest = hashlib.sha256(b'{"a":2,"b":1}').hexdigest()
    assert input_digest({"b": 1, "a": 2}) == digest
    raw = f"run-2\0build\x001\x000\0process.exec\0{digest}".encode()
    assert (
        effect_id("run-2", "build", 1, 0, "process.exec", digest) == hashlib.sha256(raw).hexdigest()
    )


def test_input_digest_keeps_non_ascii_as_utf8() -> None:
    expected = hashlib.sha256('{"k":"é"}'.encode()).hexdigest()
    assert input_digest({"k": "é"}) == expected


def test_every_identity_component_changes_the_id() -> None:
    base = ("r", "t", 1, 0, "op", input_digest({"x": 1}))
    ids = {
        effect_id(*base),
        effect_id("r2", *base[1:]),
        effect_id("r", "t2", *base[2:]),
        effect_id("r", "t", 2, *base[3:]),
        effect_id("r", "t", 1, 1, *base[4:]),
        effect_id("r", "t", 1, 0, "op2", base[5]),
        effect_id("r", "t", 1, 0, "op", input_digest({"x": 2})),
    }
    assert len(ids) == 7


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=6))
def test_input_digest_is_independent_of_key_order(value: dict[str, Any]) -> None:
    reordered = dict(reversed(list(value.items())))
    assert input_digest(reordered) == input_digest(value)
    assert (
        input_digest(value)
        == hashlib.sha256(
            json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        ).hexdigest()
    )


# --- static tables ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "cls", "risk", "idem", "policy", "pred"),
    [
        ("builtin.assign", "pure", "low", "pure", None, "fully_predictable"),
        ("builtin.assert", "pure", "low", "pure", None, "fully_predictable"),
        ("builtin.memory.read", "pure", "low", "pure", None, "fully_predictable"),
        (
            "builtin.read",
            "observe",
            "low",
            "idempotent",
            "filesystem.read",
            "partially_predictable",
        ),
        (
            "builtin.write",
            "workspace_mutate",
            "medium",
            "idempotent",
            "filesystem.write",
            "partially_predictable",
        ),
        (
            "builtin.shell.exec",
            "process_execution",
            "high",
            "unknown",
            "process.exec",
            "requires_execution",
        ),
        (
            "builtin.memory.write",
            "internal_state",
            "low",
            "keyed",
            "memory.write",
            "fully_predictable",
        ),
        (
            "builtin.long_term_memory.write",
            "external_mutate",
            "medium",
            "keyed",
            "memory.write",
            "requires_execution",
        ),
        (
            "builtin.long_term_memory.read",
            "observe",
            "low",
            "idempotent",
            None,
            "requires_execution",
        ),
        ("mcp.call", "network", "medium", "unknown", "mcp.call", "requires_execution"),
        ("a2a.delegate", "remote_agent", "high", "unknown", "a2a.delegate", "requires_execution"),
    ],
)
def test_action_kind_table(
    kind: str, cls: str, risk: str, idem: str, policy: str | None, pred: str
) -> None:
    spec = lookup(kind)
    assert (
        spec.effect_class,
        spec.risk,
        spec.idempotency,
        spec.policy_name,
        spec.predictability,
    ) == (
        cls,
        risk,
        idem,
        policy,
        pred,
    )
    assert spec.is_pure is (cls == "pure")


def test_pure_kinds_have_no_policy_name() -> None:
    for spec in entries("action"):
        if spec.is_pure:
            assert spec.policy_name is None


def test_model_effect_and_enums_are_lowercase_strings() -> None:
    for provider_kind in names("model"):
        model = model_operation(provider_kind)
        assert (model.effect_class, model.risk, model.idempotency) == (
            "model",
            "medium",
            "at_most_once",
        )
    for enum in (
        EffectClass,
        Risk,
        Idempotency,
        EffectStatus,
        ReconciliationStatus,
        Predictability,
    ):
        for member in enum:
            assert member.value == member.value.lower()
            assert str(member) == member.value
    assert {s.value for s in EffectStatus} == {
        "requested",
        "started",
        "succeeded",
        "failed",
        "uncertain",
        "waiting_for_approval",
        "cancelled",
    }


def test_mutation_classes() -> None:
    assert {c.value for c in EffectClass if is_mutation(c)} == {
        "workspace_mutate",
        "external_mutate",
        "process_execution",
        "remote_agent",
    }
    assert {c.value for c in EffectClass if not is_potentially_mutating(c)} == {
        "pure",
        "observe",
        "model",
    }


# --- effect status ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("current", "new"),
    [
        ("requested", "started"),
        ("started", "succeeded"),
        ("started", "failed"),
        ("started", "uncertain"),
        ("waiting_for_approval", "requested"),
        ("waiting_for_approval", "cancelled"),
        ("requested", "failed"),
    ],
)
def test_legal_effect_transitions(current: str, new: str) -> None:
    check_effect_transition(current, new)


@pytest.mark.parametrize(
    ("current", "new"),
    [
        ("requested", "succeeded"),  # nothing finishes without starting
        ("waiting_for_approval", "started"),
        ("uncertain", "succeeded"),  # reconciliation never rewrites the effect
        ("succeeded", "failed"),
        ("started", "requested"),
        ("started", "cancelled"),  # cancel after dispatch is uncertain, not cancelled
    ],
)
def test_illegal_effect_transitions(current: str, new: str) -> None:
    with pytest.raises(InvalidOperationError):
        check_effect_transition(current, new)


# --- reconciliation -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "confirmed", "previous", "new"),
    [
        ("uncertain", False, [], "applied"),
        ("started", False, [], "not_applied"),
        ("uncertain", False, [], "not_applied"),
        ("succeeded", True, [], "compensated"),
        ("uncertain", False, ["applied"], "applied"),  # the same conclusion again
        ("uncertain", False, ["not_applied"], "not_applied"),
        ("uncertain", False, ["applied"], "compensated"),  # applied, then undone
        ("succeeded", True, ["compensated"], "compensated"),
    ],
)
def test_accepted_reconciliations(
    status: str, confirmed: bool, previous: list[str], new: str
) -> None:
    check_reconciliation(status, confirmed, previous, new)


@pytest.mark.parametrize(
    ("status", "confirmed", "previous", "new"),
    [
        ("succeeded", True, [], "applied"),  # first applied only for started|uncertain
        ("failed", False, [], "not_applied"),
        ("requested", False, [], "applied"),
        ("succeeded", False, [], "compensated"),  # compensated needs confirmed
        ("uncertain", False, [], "compensated"),
        ("uncertain", False, ["applied"], "not_applied"),  # contradictions
        ("uncertain", False, ["not_applied"], "applied"),
        ("uncertain", False, ["not_applied"], "compensated"),
        ("uncertain", False, ["applied", "compensated"], "applied"),
    ],
)
def test_refused_reconciliations(
    status: str, confirmed: bool, previous: list[str], new: str
) -> None:
    with pytest.raises(ReconciliationConflictError):  # a store rule: exit 5
        check_reconciliation(status, confirmed, previous, new)


def test_contradiction_message_names_the_history() -> None:
    with pytest.raises(ReconciliationConflictError, match="contradictory reconciliation"):
        check_reconciliation("uncertain", False, ["applied"], "not_applied")


@pytest.mark.parametrize(
    ("status", "reconciliations", "unresolved"),
    [
        ("started", [], True),
        ("uncertain", [], True),
        ("uncertain", [{"status": "not_applied"}], False),
        ("started", ["applied"], False),
        ("requested", [], False),  # may still execute on resume
        ("succeeded", [], False),
        ("failed", [], False),
        ("waiting_for_approval", [], False),
    ],
)
def test_is_unresolved(status: str, reconciliations: list[Any], unresolved: bool) -> None:
    assert is_unresolved(status, reconciliations) is unresolved
