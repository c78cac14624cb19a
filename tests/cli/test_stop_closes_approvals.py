"""A run stopped for good leaves nothing waiting for an approval (spec/cli.md §6, §9).

When a driven run is cancelled (SIGINT, ``agentctl cancel``) while one task waits for its
approval and a sibling is still running, or its wall time runs out on the ``resume`` after a
pause, the run is terminal: its pending approval is closed (``cancelled``; approving it later
is refused, exit 5), the waiting task ends ``cancelled`` and ``replay`` of the run works —
as after ``agentctl cancel`` of a paused run. A run failed by its wall time also cancels the
tasks that never started, as any failed run does.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

HEAD = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: parked }
spec:
"""

# ``w`` waits for its approval (a write under the default policy) while ``nap`` (a model call
# the fake provider answers after 20 s, needing no approval) is still running.
SIBLINGS = (
    HEAD
    + """\
  runtime: { maxConcurrency: 2 }
  policy: { writableRoots: [out] }
  providers: { sim: { kind: fake } }
  agents:
    slow: { provider: sim, model: m, instructions: echo, maxTurns: 1, timeoutSeconds: 60,
            providerOptions: { delayMs: 20000 } }
  actions: { save: { kind: builtin.write } }
  tasks:
    - { id: nap, uses: "agent:slow", with: { prompt: p } }
    - { id: w, uses: "action:save", with: { path: out/a.txt, content: x } }
"""
)

WALL = (
    HEAD
    + """\
  runtime: { budgets: { maxWallTimeSeconds: 1 } }
  policy: { writableRoots: [out] }
  actions: { save: { kind: builtin.write } }
  tasks:
    - { id: w, uses: "action:save", with: { path: out/a.txt, content: x } }
    - { id: after, uses: "action:save", needs: [w], with: { path: out/b.txt, content: y } }
"""
)


def _inspect(cli, db: Path, run_id: str):  # type: ignore[no-untyped-def]
    got = cli("--output", "json", "inspect", run_id, "--db", str(db))
    assert got.rc == 0, got.stderr
    return got.data


def _states(data) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {t["taskId"]: t["state"] for t in data["tasks"]}


def _wait_for_siblings(cli, db: Path) -> str:  # type: ignore[no-untyped-def]
    """The run's id once ``nap`` runs and ``w`` waits for its approval."""
    for _ in range(600):
        listed = cli("--output", "json", "runs", "list", "--db", str(db))
        if listed.rc == 0 and listed.data["runs"]:
            run_id: str = listed.data["runs"][0]["runId"]
            if _states(_inspect(cli, db, run_id)) == {
                "nap": "running",
                "w": "waiting_for_approval",
            }:
                return run_id
        time.sleep(0.1)
    raise AssertionError("the run never reached running + waiting_for_approval")


def _assert_closed(cli, db: Path, run_id: str, approval_id: str) -> None:  # type: ignore[no-untyped-def]
    data = _inspect(cli, db, run_id)
    assert _states(data)["w"] == "cancelled", data["tasks"]
    assert _states(data).get("after", "cancelled") == "cancelled", data["tasks"]
    assert [e["status"] for e in data["effects"] if e["taskId"] == "w"] == ["cancelled"]
    assert data["approvals"] == []
    events = [(a["eventType"], a["taskId"]) for a in data["audit"]]
    closed = events.index(("approval.cancelled", "w"))
    # The closing is audited before what it moves: the effect it held, then its task.
    assert events.index(("effect.cancelled", "w")) > closed, events
    assert events.index(("task.cancelled", "w")) > closed, events
    late = cli(
        "--output", "json", "approvals", "approve", approval_id, "--reason", "late", "--db", str(db)
    )
    assert late.rc == 5, late.stdout
    assert "cancelled" in late.error["error"]["message"]
    assert (
        cli("--output", "json", "approvals", "list", run_id, "--db", str(db)).data["approvals"]
        == []
    )
    replayed = cli("--output", "json", "replay", run_id, "--db", str(db))
    assert replayed.data is not None, replayed.stderr  # a RunOutcome, not a refusal
    assert replayed.data["runId"].startswith("replay-")
    assert not (db.parent / "out" / "a.txt").exists()


def test_sigint_with_a_task_waiting_for_approval(
    cli, start_cli, write_workflow, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    wf = write_workflow(SIBLINGS)
    db = tmp_path / "r.db"
    proc = start_cli("--output", "json", "run", str(wf), "--db", str(db))
    try:
        run_id = _wait_for_siblings(cli, db)
        listed = cli("--output", "json", "approvals", "list", run_id, "--db", str(db))
        approval_id = listed.data["approvals"][0]["approvalId"]
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130
    assert _inspect(cli, db, run_id)["run"]["state"] == "cancelled"
    _assert_closed(cli, db, run_id, approval_id)


def test_wall_time_expiring_during_a_pause(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    wf = write_workflow(WALL)
    db = tmp_path / "r.db"
    paused = cli("--output", "json", "run", str(wf), "--db", str(db))
    assert paused.rc == 3, paused.stderr
    run_id = paused.data["runId"]
    listed = cli("--output", "json", "approvals", "list", run_id, "--db", str(db))
    approval_id = listed.data["approvals"][0]["approvalId"]
    time.sleep(2)  # past the 1 s budget, counted from the run's creation
    # Still waiting for its approval: resume returns paused and dispatches nothing, so no
    # budget is judged yet (spec/cli.md §5, §7).
    waiting = cli("--output", "json", "resume", run_id, "--db", str(db))
    assert waiting.rc == 3 and waiting.data["state"] == "paused", waiting.stderr
    approve = ("approvals", "approve", approval_id, "--reason", "ok", "--db", str(db))
    assert cli("--output", "json", *approve).rc == 0
    resumed = cli("--output", "json", "resume", run_id, "--db", str(db))
    assert resumed.rc == 4, resumed.stderr
    assert "maxWallTimeSeconds" in resumed.error["error"]["message"]
    data = _inspect(cli, db, run_id)
    assert data["run"]["state"] == "failed"
    # A failed run ends with every task terminal: none of them started, nothing was written.
    assert _states(data) == {"w": "cancelled", "after": "cancelled"}, data["tasks"]
    after = next(t for t in data["tasks"] if t["taskId"] == "after")
    assert after["error"].startswith("not started: "), after
    assert not (tmp_path / "out").exists()
