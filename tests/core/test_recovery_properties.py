"""Properties of every planner: inputs are never mutated, equal inputs give equal plans."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_recovery_helpers import base, effect, succeeded_run

from agentctl.core.recovery import (
    SourceEffect,
    SourceRun,
    SourceTask,
    compensation_document,
    plan_compensation,
    plan_repair,
    plan_retry,
)

SOURCE_WORKFLOW = base()
TARGETS = [
    SOURCE_WORKFLOW,
    base(**{"with: { n: 2 }": "with: { n: 22 }"}),
    base(**{"name: recov": "name: renamed"}),
]
TASK_IDS = list(SOURCE_WORKFLOW.plan.order)

STATUSES = ["requested", "started", "succeeded", "failed", "uncertain", "cancelled", "odd"]
CLASSES = [
    "pure",
    "observe",
    "workspace_mutate",
    "process_execution",
    "network",
    "model",
    "future_class",
]

effects_st = st.builds(
    lambda cls, idem, status, rec, attempt: effect(
        "x", f"op.{cls}", cls, idem, status=status, reconciliation=rec, attempt=attempt
    ),
    st.sampled_from(CLASSES),
    st.sampled_from(["pure", "idempotent", "keyed", "at_most_once", "unknown"]),
    st.sampled_from(STATUSES),
    st.sampled_from([None, "applied", "not_applied", "compensated"]),
    st.integers(1, 3),
)


@st.composite
def mutated_task(draw: st.DrawFn, task: SourceTask) -> SourceTask:
    changes: dict[str, Any] = {}
    if draw(st.booleans()):
        changes["state"] = draw(st.sampled_from(["succeeded", "failed", "skipped", "cancelled"]))
    if draw(st.booleans()):
        changes["disposition"] = draw(st.sampled_from(["executed", "reused", "recorded"]))
    if draw(st.booleans()):
        raw: list[SourceEffect] = draw(st.lists(effects_st, max_size=3))
        changes["effects"] = tuple(
            SourceEffect(**{**e.__dict__, "task_id": task.task_id}) for e in raw
        )
    if draw(st.booleans()):
        changes["output"] = draw(st.sampled_from([None, [1], {"forged": {"deep": [1, 2]}}]))
    if draw(st.booleans()):
        changes["state_delta"] = draw(st.sampled_from([None, {"k": [1]}, {"zz": {"a": 1}}]))
    if draw(st.booleans()):
        changes["definition_fingerprint"] = draw(st.sampled_from([None, "sha256:v1:00"]))
    return SourceTask(**{**task.__dict__, **changes})


@st.composite
def source_runs(draw: st.DrawFn) -> SourceRun:
    run = succeeded_run(SOURCE_WORKFLOW)
    tasks = {tid: draw(mutated_task(task)) for tid, task in run.tasks.items()}
    return SourceRun(
        run_id="run-src",
        mode=draw(st.sampled_from(["execute", "retry", "replay"])),
        state=draw(st.sampled_from(["succeeded", "failed", "cancelled", "paused"])),
        workflow_name=run.workflow_name,
        workflow_digest=run.workflow_digest,
        tasks=tasks,
    )


def artifact_ok(digest: str, size: int) -> bool:
    return not digest.startswith("0")


@settings(max_examples=60, deadline=None)
@given(
    source=source_runs(),
    target_index=st.integers(0, len(TARGETS) - 1),
    roots=st.lists(st.sampled_from([*TASK_IDS, "ghost"]), max_size=3),
    flags=st.tuples(st.booleans(), st.booleans()),
    selection=st.none() | st.lists(st.sampled_from([*TASK_IDS, "ghost"]), max_size=2),
)
def test_planning_is_pure_and_deterministic(
    source: SourceRun,
    target_index: int,
    roots: list[str],
    flags: tuple[bool, bool],
    selection: list[str] | None,
) -> None:
    target = TARGETS[target_index]
    failed_only, restart = flags
    snapshot = copy.deepcopy((source, target.plan, target.document, roots, selection))

    def plans() -> list[dict[str, Any]]:
        retry = plan_retry(
            source,
            target.plan,
            failed_only=failed_only,
            roots=roots,
            restart_successful=restart,
            artifact_ok=artifact_ok,
        )
        repair = plan_repair(
            source, target.plan, roots=roots, restart_successful=restart, artifact_ok=artifact_ok
        )
        compensation = plan_compensation(source, SOURCE_WORKFLOW.plan, tasks=selection)
        for plan in (retry, repair):
            assert plan.compatible == (not plan.blocked)
            assert not set(plan.reuse) & set(plan.execute)
            assert all(source.tasks[t].state == "succeeded" for t in plan.reuse)
        assert compensation.executable == (not compensation.blocked and bool(compensation.steps))
        document = compensation_document(SOURCE_WORKFLOW.document, compensation)
        return [retry.to_json(), repair.to_json(), compensation.to_json(), document]

    first = plans()
    assert plans() == first
    assert (source, target.plan, target.document, roots, selection) == snapshot
