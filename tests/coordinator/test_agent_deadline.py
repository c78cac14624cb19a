"""An agent task's own ``timeoutSeconds`` bounds its whole attempt, between calls too.

The run is driven in this process (real ledger file, real workers, the fake provider) with a
coordinator clock that reads an hour later once the agent's tool call has written its file:
time passes between the agent's calls, without any test waiting for it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from registry_helpers import compile_text, fetch_effects

from agentctl.coordinator.clock import Clock
from agentctl.coordinator.launch import run_trio
from agentctl.coordinator.service import DriveRequest, RunOutcome, create_run, drive_run
from agentctl.ledger import open_ledger
from tests.cli.test_agent_turn_approvals import FAKE

# The approval test's agent (one write, then a final answer), run without approvals.
WORKFLOW = FAKE.replace("approval: mutations", "approval: never")


@dataclass
class LaterOnceWritten(Clock):
    """The wall clock, but its monotonic reading is an hour on once ``marker`` exists."""

    marker: Path = Path("/nonexistent")

    def monotonic(self) -> float:
        return time.monotonic() + (3600.0 if self.marker.exists() else 0.0)


def _drive(tmp_path: Path, text: str) -> RunOutcome:
    document, plan = compile_text(text)
    clock = LaterOnceWritten(tmp_path / "out.txt")
    with open_ledger(str(tmp_path / "runtime.db")) as ledger:
        run_id, trace_id = create_run(
            ledger, plan=plan, document=document, inputs={}, workspace=str(tmp_path), clock=clock
        )
        request = DriveRequest(ledger, run_id, trace_id, plan, str(tmp_path), 60, clock=clock)
        return run_trio(drive_run, request)


def _effects(tmp_path: Path) -> list[tuple[str, str]]:
    return [(e["operation"], e["status"]) for e in fetch_effects(tmp_path / "runtime.db")]


def test_a_deadline_passed_between_calls_fails_the_task_with_nothing_in_flight(
    tmp_path: Path,
) -> None:
    bounded = WORKFLOW.replace("{ prompt: go } }", "{ prompt: go }, timeoutSeconds: 30 }")
    outcome = _drive(tmp_path, bounded)
    assert outcome.state == "failed"
    assert outcome.errors["w"] == (
        "task w: the task's timeoutSeconds (30 s) passed before the agent's next model call; "
        "nothing was in flight"
    )
    # The tool call finished (its file is written); the second model call never started.
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == "hello"
    assert _effects(tmp_path) == [("fake", "succeeded"), ("builtin.write", "succeeded")]


def test_a_passed_deadline_is_not_repeated_by_the_tasks_retry(tmp_path: Path) -> None:
    """spec/dsl.md §4: ``retry`` repeats only retryable provider errors and local I/O errors;
    a task's timeout is neither (a second attempt would have a deadline of its own)."""
    bounded = WORKFLOW.replace(
        "{ prompt: go } }", "{ prompt: go }, timeoutSeconds: 30, retry: { maxAttempts: 3 } }"
    )
    outcome = _drive(tmp_path, bounded)
    assert outcome.state == "failed"
    assert "passed before the agent's next model call" in outcome.errors["w"]
    assert _effects(tmp_path) == [("fake", "succeeded"), ("builtin.write", "succeeded")]


def test_the_runtime_default_timeout_does_not_bound_an_agent_task(tmp_path: Path) -> None:
    # Only a timeout the task gives bounds the agent as a whole, not the default for tasks.
    text = WORKFLOW.replace("  tasks:", "  runtime: { defaultTimeoutSeconds: 30 }\n  tasks:")
    assert "defaultTimeoutSeconds" in text and "approval: never" in text
    outcome = _drive(tmp_path, text)
    assert outcome.state == "succeeded", outcome.errors
    assert _effects(tmp_path) == [
        ("fake", "succeeded"),
        ("builtin.write", "succeeded"),
        ("fake", "succeeded"),
    ]
