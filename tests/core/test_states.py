"""Task and run state machines: explicit legal transitions, immutable terminal states."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentctl.core.states import (
    RUN_TRANSITIONS,
    TASK_TRANSITIONS,
    TERMINAL_RUN_STATES,
    TERMINAL_TASK_STATES,
    RunMode,
    RunState,
    TaskDisposition,
    TaskState,
    can_transition_task,
    check_run_transition,
    check_task_transition,
    final_run_state,
    is_terminal_run,
    is_terminal_task,
)
from agentctl.errors import InvalidOperationError


def test_enum_values_are_the_persisted_lowercase_strings() -> None:
    assert [s.value for s in TaskState] == [
        "pending",
        "ready",
        "running",
        "waiting_for_approval",
        "waiting_for_effect",
        "retry_scheduled",
        "succeeded",
        "failed",
        "skipped",
        "cancelled",
    ]
    assert [s.value for s in RunState] == [
        "queued",
        "running",
        "paused",
        "succeeded",
        "failed",
        "cancelled",
    ]
    assert [m.value for m in RunMode] == [
        "execute",
        "check",
        "replay",
        "fork",
        "repair",
        "retry",
        "compensation",
    ]
    assert [d.value for d in TaskDisposition] == ["executed", "reused", "recorded"]


def test_terminal_sets() -> None:
    assert {"succeeded", "failed", "skipped", "cancelled"} == TERMINAL_TASK_STATES
    assert {"succeeded", "failed", "cancelled"} == TERMINAL_RUN_STATES
    assert is_terminal_task("skipped") and not is_terminal_task("retry_scheduled")
    assert is_terminal_run("cancelled") and not is_terminal_run("paused")


PATHS = [
    # the ordinary path, with an effect wait in the middle
    ["pending", "ready", "running", "waiting_for_effect", "running", "succeeded"],
    # when=false, and a dependency that did not succeed
    ["pending", "ready", "skipped"],
    ["pending", "skipped"],
    # approval, approved then rejected
    ["pending", "ready", "running", "waiting_for_approval", "running", "succeeded"],
    ["pending", "ready", "running", "waiting_for_approval", "failed"],
    # a retryable failure, and a not_applied reconciliation after a crash
    ["pending", "ready", "running", "retry_scheduled", "ready", "running", "failed"],
    ["pending", "ready", "running", "waiting_for_effect", "retry_scheduled", "ready"],
    # repair/retry materialise a reused task
    ["pending", "succeeded"],
    # cancellation from every live state
    ["pending", "cancelled"],
    ["pending", "ready", "cancelled"],
    ["pending", "ready", "running", "cancelled"],
    ["pending", "ready", "running", "waiting_for_approval", "cancelled"],
    ["pending", "ready", "running", "waiting_for_effect", "cancelled"],
    ["pending", "ready", "running", "retry_scheduled", "cancelled"],
]


@pytest.mark.parametrize("path", PATHS)
def test_documented_task_paths_are_legal(path: list[str]) -> None:
    for current, new in itertools.pairwise(path):
        assert check_task_transition(current, new) == new


@pytest.mark.parametrize(
    ("current", "new"),
    [
        ("pending", "running"),  # must become ready first
        ("ready", "succeeded"),
        ("ready", "failed"),
        ("running", "ready"),
        ("running", "skipped"),  # skips never pass through running
        ("retry_scheduled", "running"),
        ("waiting_for_approval", "succeeded"),
        ("running", "running"),  # no self-transitions
        ("succeeded", "running"),
        ("failed", "retry_scheduled"),
        ("skipped", "ready"),
        ("cancelled", "pending"),
    ],
)
def test_illegal_task_transitions_raise(current: str, new: str) -> None:
    with pytest.raises(InvalidOperationError, match=f"from {current} to {new}"):
        check_task_transition(current, new)


def test_run_transitions() -> None:
    assert check_run_transition("running", "paused") is RunState.PAUSED
    assert check_run_transition("paused", "running") is RunState.RUNNING
    for current, new in [("running", "succeeded"), ("running", "failed"), ("running", "cancelled")]:
        check_run_transition(current, new)
    for current, new in [("paused", "failed"), ("paused", "cancelled")]:
        check_run_transition(current, new)
    for current, new in [("paused", "succeeded"), ("running", "running"), ("failed", "running")]:
        with pytest.raises(InvalidOperationError):
            check_run_transition(current, new)


def test_unknown_states_are_invalid_operations() -> None:
    with pytest.raises(InvalidOperationError, match="unknown task state"):
        check_task_transition("pending", "done")
    with pytest.raises(InvalidOperationError, match="unknown run state"):
        check_run_transition("idle", "running")


@pytest.mark.parametrize("table", [TASK_TRANSITIONS, RUN_TRANSITIONS])
def test_terminal_states_have_no_exits_and_every_state_is_listed(
    table: dict[str, frozenset[str]],
) -> None:
    states = set(table)
    for state, exits in table.items():
        assert exits <= states
        assert state not in exits
    terminal = TERMINAL_TASK_STATES if table is TASK_TRANSITIONS else TERMINAL_RUN_STATES
    for state in terminal:
        assert table[state] == frozenset()


@given(st.lists(st.sampled_from(list(TaskState)), min_size=1, max_size=30))
def test_random_task_walks_never_pass_an_illegal_transition(choices: list[TaskState]) -> None:
    # Follow the machine: at each step take a legal exit picked by the drawn value.
    state = TaskState.PENDING
    for choice in choices:
        exits = sorted(TASK_TRANSITIONS[state])
        if not exits:
            assert state in TERMINAL_TASK_STATES
            for target in TaskState:
                assert not can_transition_task(state, target)
            return
        new = exits[list(TaskState).index(choice) % len(exits)]
        state = check_task_transition(state, new)


@given(st.sampled_from(list(TaskState)), st.sampled_from(list(TaskState)))
def test_check_agrees_with_the_table(current: TaskState, new: TaskState) -> None:
    if new in TASK_TRANSITIONS[current]:
        check_task_transition(current, new)
    else:
        with pytest.raises(InvalidOperationError):
            check_task_transition(current, new)


@given(st.lists(st.sampled_from(list(RunState)), max_size=20))
def test_random_run_walks_stay_legal_and_terminal_runs_are_immutable(
    choices: list[RunState],
) -> None:
    state = RunState.RUNNING
    for new in choices:
        if new in RUN_TRANSITIONS[state]:
            state = check_run_transition(state, new)
        else:
            with pytest.raises(InvalidOperationError):
                check_run_transition(state, new)
    if state in TERMINAL_RUN_STATES:
        assert not RUN_TRANSITIONS[state]


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        (["succeeded", "skipped"], RunState.SUCCEEDED),
        (["succeeded", "failed", "cancelled"], RunState.FAILED),
        (["succeeded", "cancelled"], RunState.CANCELLED),
        (["succeeded", "running"], None),
        (["waiting_for_approval"], None),
        ([], RunState.SUCCEEDED),
    ],
)
def test_final_run_state(states: list[str], expected: RunState | None) -> None:
    assert final_run_state(states) == expected
