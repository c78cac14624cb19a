"""SIGTERM to the process driving a run while a worker effect is in flight, black-box.

Whoever drives the run — `run`, `resume`, or a `serve` that hands the run back — the cut
effect is `uncertain` (never re-run on its own), and the run's tasks are left in the state a
recovery gives them: no task still says `running` once nothing drives the run. `run` and
`resume` end the run `cancelled` (the task `cancelled`); a stopping `serve` leaves it
`running` for another `serve`, its task parked `waiting_for_effect`, as a claim or a `resume`
would park it. Either way `inspect` tells the truth at once, and `retry`/`repair` take the
run as their source (blocked only by the effect awaiting its reconciliation), not refused
with `source_not_terminal` until some `resume` has looked at it. After the reconciliation a
repair runs the task as a fresh effect: the cut one never ran twice.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from tests.cli.queue_helpers import MARKER_WORKFLOW, Query, ledger_query, markers, wait_for
from tests.clibackend import LedgerTarget
from tests.conftest import Cli, StartCli

DB = ("--db", "db.sqlite")
LEASE = ("--lease-seconds", "2", "--poll-seconds", "0.2")
# Task a's effect waits while markers/g.hold exists: in flight for as long as the test needs.
HELD = ("--input", "tag=g")


def _drive(cli: Cli, start_cli: StartCli, how: str) -> subprocess.Popen[str]:
    """Start the process that drives a fresh run of the marker workflow ``how`` says."""
    if how == "serve":
        assert cli("--output", "json", "submit", "wf.yaml", *DB, *HELD).rc == 0
        return start_cli("--output", "json", "serve", *DB, "--exit-when-idle", *LEASE)
    if how == "run":
        return start_cli("--output", "json", "run", "wf.yaml", *DB, *HELD)
    paused = cli("--output", "json", "run", "wf.yaml", *DB, *HELD)  # approval: high_risk
    assert paused.rc == 3, paused.stderr
    run_id = paused.data["runId"]
    pending = cli("--output", "json", "approvals", "list", run_id, *DB).data["approvals"]
    approve = ("approvals", "approve", pending[0]["approvalId"], "--reason", "go", *DB)
    assert cli(*approve).rc == 0
    return start_cli("--output", "json", "resume", run_id, *DB)


def _blocked_rules(cli: Cli, run_id: str, rc: int = 3) -> dict[str, list[str]]:
    """The rules that block a retry and a repair of ``run_id`` (plans only: nothing runs),
    whose exit code is ``rc``."""
    plans = {
        "retry": ("retry", "wf.yaml", run_id, "--failed", "--plan", *DB),
        "repair": ("repair", "wf.yaml", run_id, "--from", "a", "--plan", *DB),
    }
    found = {}
    for name, args in plans.items():
        got = cli("--output", "json", *args)
        assert got.rc == rc, (got.rc, got.stdout, got.stderr)
        found[name] = [b["rule"] for b in got.data["blockedReuse"]]
    return found


def _started(query: Query) -> bool:
    """Whether task a's effect is started (False while `run` has not created the ledger)."""
    try:
        found = query("SELECT status FROM effects WHERE task_id = 'a'", ())
    except Exception:  # no schema yet: nothing started
        return False
    return found == [("started",)]


def _task_states(query: Query) -> dict[str, tuple[str, str | None]]:
    rows = query("SELECT task_id, state, error FROM task_states", ())
    return {str(t): (str(s), e) for t, s, e in rows}


# What each driver leaves: its exit code, the run's state, task a's state.
LEFT = {
    "run": (130, "cancelled", "cancelled"),
    "resume": (130, "cancelled", "cancelled"),
    "serve": (0, "running", "waiting_for_effect"),
}


def _sigterm_mid_effect(
    cli: Cli, start_cli: StartCli, query: Query, root: Path, how: str
) -> subprocess.CompletedProcess[str]:
    """Drive a run ``how`` says and SIGTERM its process while task a's effect is held."""
    workflow = MARKER_WORKFLOW
    if how == "resume":
        workflow = workflow.replace("approval: never", "approval: high_risk")
    (root / "wf.yaml").write_text(workflow, encoding="utf-8")
    (root / "markers").mkdir()
    (root / "markers" / "g.hold").touch()
    driving = _drive(cli, start_cli, how)
    wait_for(lambda: _started(query), what="task a's effect to start")
    driving.send_signal(signal.SIGTERM)
    out, err = driving.communicate(timeout=120)
    (root / "markers" / "g.hold").unlink()
    return subprocess.CompletedProcess(driving.args, driving.returncode, out, err)


@pytest.mark.parametrize("how", sorted(LEFT))
def test_sigterm_mid_effect_leaves_the_tasks_as_recovery_would(
    cli: Cli, start_cli: StartCli, ledger_target: LedgerTarget, tmp_path: Path, how: str
) -> None:
    query = ledger_query(ledger_target, tmp_path / "db.sqlite")
    stopped = _sigterm_mid_effect(cli, start_cli, query, tmp_path, how)
    rc, run_state, task_state = LEFT[how]
    assert stopped.returncode == rc, (stopped.stdout, stopped.stderr)
    assert "Traceback" not in stopped.stderr, stopped.stderr
    [(run_id, state, owner)] = query("SELECT run_id, state, owner_pid FROM runs", ())
    assert (state, owner) == (run_state, None)  # nothing drives it any more
    [(effect_id, status)] = query("SELECT effect_id, status FROM effects", ())
    assert status == "uncertain"
    tasks = _task_states(query)
    assert tasks["a"][0] == task_state
    assert "running" not in {s for s, _ in tasks.values()}
    shown = cli("--output", "json", "inspect", run_id, *DB).data["tasks"]
    assert {t["taskId"]: t["state"] for t in shown}["a"] == task_state
    assert _blocked_rules(cli, run_id) == {
        "retry": ["unreconciled_effect"],
        "repair": ["unreconciled_effect"],
    }
    # The cut effect did not run (its process was killed while held); judged so, the
    # recovery plans are ready, and a repair runs task a as a fresh effect — once — then the
    # rest (not after `resume`: its high_risk policy would pause the repair at each task).
    assert markers(tmp_path) == {}
    why = ("--status", "not-applied", "--reason", "killed while held")
    why += ("--approved",) if how == "resume" else ()  # high_risk: the verdict needs it
    assert cli("effects", "reconcile", effect_id, *why, *DB).rc == 0
    assert _blocked_rules(cli, run_id, 0) == {"retry": [], "repair": []}
    if how == "resume":
        return
    repaired = cli("--output", "json", "repair", "wf.yaml", run_id, "--from", "a", *DB, *HELD)
    assert repaired.rc == 0, repaired.stderr
    assert json.loads(repaired.stdout)["data"]["state"] == "succeeded"
    assert markers(tmp_path) == {"g": ["g a", "g b", "g c"]}
