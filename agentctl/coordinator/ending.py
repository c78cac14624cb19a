"""How a drive ends: the run's state once nothing more is ready, fail-fast first.

A task that failed under ``failure: stop`` (the default) fails the run, whatever was listed
before or after it: a sibling held for its approval — in this drive, or by an earlier pause —
does not keep the run ``paused``, and never runs (``service._finish`` cancels it, and the
ledger closes its approval, in the transaction that ends the run). A drive resumed on a run
where such a failure is already recorded starts nothing new either (``failure_stops``).

Invariant: ``final_state`` is ``paused`` only while an operator still has an approval to
decide in a run that can still succeed.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentctl.coordinator.live import Live
from agentctl.core.plan import Plan


def failure_stops(plan: Plan, states: Mapping[str, str]) -> bool:
    """Whether a task already failed under ``failure: stop``: the run it belongs to is
    failed, only not settled yet (a run paused, or interrupted, after the failure)."""
    return any(task.failure == "stop" and states.get(task.id) == "failed" for task in plan.tasks)


def final_state(live: Live, stopped: bool) -> str:
    """succeeded | failed | paused | blocked | halted | refused, once nothing more is ready
    (``stopped``: a task's failure, or a halt, stopped the drive)."""
    states = set(live.states.values())
    if "waiting_for_effect" in states:
        return "blocked"
    if live.refused is not None and "failed" not in states:
        return "refused"  # a failure, in a sibling of the same batch, fails the run instead
    if live.halted is not None:
        return "halted"
    if stopped:  # a failure stopped the run: an undecided approval cannot make it succeed
        return "failed"
    if live.awaits_operator():
        return "paused"
    return "failed" if "failed" in states else "succeeded"
