"""Task and run state machines, run modes and task dispositions (spec/dsl.md §4, spec/cli.md §3–§5).

Invariants:
- Every legal transition is listed explicitly in ``TASK_TRANSITIONS`` / ``RUN_TRANSITIONS``;
  anything else raises ``InvalidOperationError``. A state never "transitions" to itself.
- Terminal states have no exits: a succeeded, failed, skipped or cancelled task, and a
  succeeded, failed or cancelled run, are immutable.
- Why the less obvious task edges exist:
  pending → skipped       a dependency did not succeed, or recorded replay copies a skip;
  pending → succeeded     retry/repair materialise a reused task without running it; and a
                          pure task's completion is one UPDATE from pending, audited as the
                          ready → running → succeeded it passes (``Finished.passed``);
  ready → skipped         the ``when`` condition was false, or the route was not selected;
  running → retry_scheduled → ready
                          a retryable failure, or a not_applied/compensated reconciliation
                          (waiting_for_effect → retry_scheduled is the same case mid-effect);
  waiting_for_approval → running | failed
                          approved, or rejected ("approval rejected").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum

from agentctl.errors import InvalidOperationError


class TaskState(StrEnum):
    PENDING = "pending"
    READY = "ready"
    RUNNING = "running"
    WAITING_FOR_APPROVAL = "waiting_for_approval"
    WAITING_FOR_EFFECT = "waiting_for_effect"
    RETRY_SCHEDULED = "retry_scheduled"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"


class RunState(StrEnum):
    QUEUED = "queued"  # submitted (``agentctl submit``); a ``serve`` claims and drives it
    RUNNING = "running"
    PAUSED = "paused"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class RunMode(StrEnum):
    EXECUTE = "execute"
    CHECK = "check"
    REPLAY = "replay"
    FORK = "fork"
    REPAIR = "repair"
    RETRY = "retry"
    COMPENSATION = "compensation"


class TaskDisposition(StrEnum):
    EXECUTED = "executed"  # ran (or will run) in this run
    REUSED = "reused"  # materialised from a source run by retry/repair
    RECORDED = "recorded"  # copied from a source run by recorded replay


_T = TaskState
TASK_TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    _T.PENDING: frozenset({_T.READY, _T.SKIPPED, _T.SUCCEEDED, _T.CANCELLED}),
    _T.READY: frozenset({_T.RUNNING, _T.SKIPPED, _T.CANCELLED}),
    _T.RUNNING: frozenset(
        {
            _T.WAITING_FOR_APPROVAL,
            _T.WAITING_FOR_EFFECT,
            _T.RETRY_SCHEDULED,
            _T.SUCCEEDED,
            _T.FAILED,
            _T.CANCELLED,
        }
    ),
    _T.WAITING_FOR_APPROVAL: frozenset({_T.RUNNING, _T.FAILED, _T.CANCELLED}),
    _T.WAITING_FOR_EFFECT: frozenset({_T.RUNNING, _T.RETRY_SCHEDULED, _T.FAILED, _T.CANCELLED}),
    _T.RETRY_SCHEDULED: frozenset({_T.READY, _T.CANCELLED}),
    _T.SUCCEEDED: frozenset(),
    _T.FAILED: frozenset(),
    _T.SKIPPED: frozenset(),
    _T.CANCELLED: frozenset(),
}

_R = RunState
RUN_TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    _R.QUEUED: frozenset({_R.RUNNING, _R.CANCELLED}),
    _R.RUNNING: frozenset({_R.PAUSED, _R.SUCCEEDED, _R.FAILED, _R.CANCELLED}),
    _R.PAUSED: frozenset({_R.RUNNING, _R.FAILED, _R.CANCELLED}),
    _R.SUCCEEDED: frozenset(),
    _R.FAILED: frozenset(),
    _R.CANCELLED: frozenset(),
}

TERMINAL_TASK_STATES = frozenset(s for s, exits in TASK_TRANSITIONS.items() if not exits)
TERMINAL_RUN_STATES = frozenset(s for s, exits in RUN_TRANSITIONS.items() if not exits)
# What a cancellation (or a wall-time stop) moves to ``cancelled``: in flight or about to start.
CANCELLABLE_TASK_STATES = frozenset({"running", "waiting_for_effect", "retry_scheduled", "ready"})


def cancellable(states: Mapping[str, str]) -> tuple[str, ...]:
    """The tasks (of ``task id → state``) a cancellation moves to ``cancelled``."""
    return tuple(t for t, s in states.items() if s in CANCELLABLE_TASK_STATES)


def _parse_task(value: str) -> TaskState:
    try:
        return TaskState(value)
    except ValueError as exc:
        raise InvalidOperationError(f"unknown task state {value!r}") from exc


def _parse_run(value: str) -> RunState:
    try:
        return RunState(value)
    except ValueError as exc:
        raise InvalidOperationError(f"unknown run state {value!r}") from exc


def can_transition_task(current: str, new: str) -> bool:
    return _parse_task(new) in TASK_TRANSITIONS[_parse_task(current)]


def can_transition_run(current: str, new: str) -> bool:
    return _parse_run(new) in RUN_TRANSITIONS[_parse_run(current)]


def check_task_transition(current: str, new: str) -> TaskState:
    """Return ``new`` as a ``TaskState`` if ``current → new`` is legal, else raise."""
    if not can_transition_task(current, new):
        raise InvalidOperationError(f"invalid task transition from {current} to {new}")
    return TaskState(new)


def check_run_transition(current: str, new: str) -> RunState:
    """Return ``new`` as a ``RunState`` if ``current → new`` is legal, else raise."""
    if not can_transition_run(current, new):
        raise InvalidOperationError(f"invalid run transition from {current} to {new}")
    return RunState(new)


def is_terminal_task(state: str) -> bool:
    return _parse_task(state) in TERMINAL_TASK_STATES


def is_terminal_run(state: str) -> bool:
    return _parse_run(state) in TERMINAL_RUN_STATES


def final_run_state(task_states: Iterable[str]) -> RunState | None:
    """The run's end state once every task is terminal, else ``None``.

    A failed task fails the run; otherwise any cancelled task cancels it; otherwise (all
    succeeded or skipped) it succeeded.
    """
    states = [_parse_task(s) for s in task_states]
    if any(s not in TERMINAL_TASK_STATES for s in states):
        return None
    if TaskState.FAILED in states:
        return RunState.FAILED
    if TaskState.CANCELLED in states:
        return RunState.CANCELLED
    return RunState.SUCCEEDED
