"""A provider session ends when its agent attempt ends, however it ends (the CLI in a tmp dir,
the fake provider): a task that fails between two turns (a tool failed, ``maxTurns`` ran out)
leaves its session ``failed``, a cancelled run's ``cancelled`` — also after a crash, and a
reconciliation made after the attempt ended adds the answer's usage without reopening it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.cli.test_agent_sessions import (
    GUIDE,
    _crashed_run,
    _inspect,
    _model_effects,
    _setup,
    reconcile_applied,
)
from tests.conftest import Cli

MISSING = GUIDE.replace("toolInput: { path: fixture/service.txt }", "toolInput: { path: nope.txt }")


def _session(cli: Cli, run_id: str) -> dict[str, Any]:
    [session] = _inspect(cli, run_id)["providerSessions"]
    return session


def _run(cli: Cli, tmp_path: Path, text: str) -> tuple[int, str]:
    _setup(tmp_path, text)
    done = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    listed = cli("--output", "json", "runs", "list", "--db", "r.db")
    return done.rc, str(listed.data["runs"][0]["runId"])


def test_a_tool_failure_between_turns_ends_the_session_failed(cli: Cli, tmp_path: Path) -> None:
    rc, run_id = _run(cli, tmp_path, MISSING)
    assert rc == 4
    session = _session(cli, run_id)
    assert (session["status"], session["finish"], session["calls"]) == ("failed", "tool_calls", 1)


def test_running_out_of_turns_ends_the_session_failed(cli: Cli, tmp_path: Path) -> None:
    rc, run_id = _run(cli, tmp_path, GUIDE.replace("maxTurns: 2", "maxTurns: 1"))
    assert rc == 4
    seen = _inspect(cli, run_id)
    assert "turns without completing" in str(seen["tasks"][0]["error"])
    [session] = seen["providerSessions"]
    assert (session["status"], session["finish"]) == ("failed", "tool_calls")


def test_cancelling_a_run_held_for_a_tool_approval_ends_the_session_cancelled(
    cli: Cli, tmp_path: Path
) -> None:
    held = GUIDE.replace(
        "approval: never\n      inputSchema", "approval: always\n      inputSchema"
    )
    rc, run_id = _run(cli, tmp_path, held)
    assert rc == 3
    assert _session(cli, run_id)["status"] == "active"  # paused: the attempt goes on
    cancelled = cli("--output", "json", "cancel", run_id, "--db", "r.db")
    assert cancelled.rc == 0, cancelled.stderr
    assert _session(cli, run_id)["status"] == "active"  # recorded for the next resume
    resumed = cli("--output", "json", "resume", run_id, "--db", "r.db")
    assert resumed.rc == 130, resumed.stderr
    assert _session(cli, run_id)["status"] == "cancelled"


def _resumed_after_crash(cli: Cli, tmp_path: Path, *, cancel: bool) -> tuple[int, str]:
    """Crash once the first answer (asking for the tool) is durable, then resume: after a
    ``cancel`` (the resume honours it), or with the tool's file gone (its read fails)."""
    run_id = _crashed_run(cli, tmp_path, "coordinator.after_outcome")
    assert _session(cli, run_id)["status"] == "active"
    if cancel:
        assert cli("--output", "json", "cancel", run_id, "--db", "r.db").rc == 0
    else:
        (tmp_path / "fixture" / "service.txt").unlink()
    return cli("--output", "json", "resume", run_id, "--db", "r.db").rc, run_id


def test_a_crash_then_a_failing_turn_on_resume_ends_the_session_failed(
    cli: Cli, tmp_path: Path
) -> None:
    rc, run_id = _resumed_after_crash(cli, tmp_path, cancel=False)
    assert rc == 4
    session = _session(cli, run_id)
    assert (session["status"], session["calls"]) == ("failed", 1)


def test_a_crashed_run_is_cancelled_at_once_and_ends_its_session_cancelled(
    cli: Cli, tmp_path: Path
) -> None:
    # Its coordinator is dead, so nothing would honour the flag: ``cancel`` ends the run.
    rc, run_id = _resumed_after_crash(cli, tmp_path, cancel=True)
    assert _session(cli, run_id)["status"] == "cancelled"
    shown = cli("--output", "json", "inspect", run_id, "--db", "r.db").data["run"]
    assert (shown["state"], shown["cancellationRequested"]) == ("cancelled", True)
    assert rc == 4  # the resume finds a terminal run


def test_a_cancel_mid_call_ends_the_session_and_a_late_reconcile_keeps_it_ended(
    cli: Cli, tmp_path: Path
) -> None:
    # The run's wall-clock limit cancels it while the first model call is in flight. The limit
    # counts from the run's start, so it leaves room for the start and the dispatch on a loaded
    # machine (parallel test workers); the call's delay and the agent's own limit outlast it.
    slow = GUIDE.replace("finalText: VERIFIED", "finalText: VERIFIED, delayMs: 30000")
    _setup(
        tmp_path,
        slow.replace("maxToolCalls: 1, timeoutSeconds: 5", "maxToolCalls: 1, timeoutSeconds: 60"),
    )
    stopped = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", "--timeout-seconds", "10")
    assert stopped.rc == 130, stopped.stderr
    seen = _inspect(cli, stopped.data["runId"])
    [session] = seen["providerSessions"]
    assert (session["status"], session["usage"]) == ("cancelled", {})
    [first] = _model_effects(seen)
    assert first["status"] == "uncertain"
    answer = {"finish": "tool_calls", "text": "", "toolCalls": [], "usage": {"inputTokens": 5}}
    reconcile_applied(cli, tmp_path, first["effectId"], answer)
    after = _session(cli, stopped.data["runId"])
    assert (after["status"], after["finish"]) == ("cancelled", "tool_calls")
    assert after["usage"]["inputTokens"] == 5
