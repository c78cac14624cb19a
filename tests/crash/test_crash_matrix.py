"""Kill-and-recover: the coordinator SIGKILLs itself at each named crash point.

For every point, ``resume`` either completes with every confirmed effect executed exactly once
(the effect appends a line to a marker file), or exits 3 naming the uncertain effect; after the
operator reconciles it (not-applied → a fresh attempt runs; applied + result → nothing
re-executes) the run completes. The database passes ``PRAGMA integrity_check`` after each kill.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agentctl.crashpoints import CrashPoint

WORKFLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: crashy }
spec:
  policy: { approval: never, processAllowlist: [sh], writableRoots: [out] }
  actions:
    mark:
      kind: builtin.shell.exec
      command: /bin/sh
      args: ["-c", "echo ran >> marker.txt; echo done"]
      timeoutSeconds: 30
    save: { kind: builtin.write }
  tasks:
    - { id: first, uses: "action:mark" }
    - id: second
      uses: "action:save"
      needs: [first]
      with: { path: out/x.txt, content: "${{ tasks.first.output.stdout }}" }
"""

# Every coordinator and worker point; the artifact and GC points are killed in
# tests/ledger/test_ledger_artifact_crash.py. A new point is covered the day it is named.
POINTS = [p.value for p in CrashPoint if p.startswith(("coordinator.", "worker."))]
# The one window that only exists while an effect waits for its approval.
APPROVAL_POINTS = {CrashPoint.AFTER_REQUESTED.value}


def _workflow(point: str) -> str:
    if point in APPROVAL_POINTS:
        return WORKFLOW.replace("approval: never", "approval: mutations")
    return WORKFLOW


APPLIED_RESULT = {
    "status": "changed",
    "changed": True,
    "exitCode": 0,
    "stdout": "done\n",
    "stderr": "",
}


def _marker(ws: Path) -> int:
    path = ws / "marker.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _integrity(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


def _run_id(cli, db: Path) -> str:  # type: ignore[no-untyped-def]
    listed = cli("--output", "json", "runs", "list", "--db", str(db))
    assert listed.rc == 0, listed.stderr
    return str(listed.data["runs"][0]["runId"])


def _approve_pending(cli, db: Path, run_id: str) -> None:  # type: ignore[no-untyped-def]
    listed = cli("--output", "json", "approvals", "list", run_id, "--db", str(db))
    for approval in listed.data["approvals"]:
        done = cli(
            "approvals", "approve", approval["approvalId"], "--reason", "ok", "--db", str(db)
        )
        assert done.rc == 0, done.stderr


def _reconcile_by_marker(cli, db: Path, run_id: str, tmp_path: Path, message: str) -> None:  # type: ignore[no-untyped-def]
    effects = cli("--output", "json", "effects", "list", run_id, "--db", str(db)).data["effects"]
    uncertain = [e for e in effects if e["status"] == "uncertain"]
    assert len(uncertain) == 1 and uncertain[0]["effectId"] in message
    args = ["effects", "reconcile", uncertain[0]["effectId"], "--db", str(db)]
    if _marker(tmp_path) == 0:
        args += ["--status", "not-applied", "--reason", "marker shows it never ran"]
    else:
        result_file = tmp_path / "result.json"
        result_file.write_text(json.dumps(APPLIED_RESULT))
        args += ["--status", "applied", "--reason", "marker shows it ran"]
        args += ["--result-file", str(result_file)]
    rec = cli(*args)
    assert rec.rc == 0, rec.stderr


def _crash(cli, folder: Path, point: str) -> tuple[Path, str]:  # type: ignore[no-untyped-def]
    """Run the workflow in ``folder`` until ``point`` kills it; returns (database, run id)."""
    (folder / "wf.yaml").write_text(_workflow(point))
    db = folder / "state" / "r.db"
    crash = {"AGENTCTL_CRASH_AT": point}
    first = cli("--output", "json", "run", "wf.yaml", "--db", str(db), cwd=folder, env=crash)
    if point.startswith("coordinator."):
        assert first.rc == -9, (first.rc, first.stderr)
    else:
        # A lost worker leaves the effect uncertain: the run stays resumable, exit 4.
        assert first.rc == 4, (first.rc, first.stderr)
        assert "uncertain" in first.error["error"]["message"]
    assert _integrity(db) == "ok"
    return db, _run_id(cli, db)


@pytest.mark.parametrize("point", POINTS)
def test_crash_then_resume(point: str, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db, run_id = _crash(cli, tmp_path, point)
    assert _marker(tmp_path) <= 1
    for _round in range(6):  # approvals and reconciliations, each followed by a resume
        _approve_pending(cli, db, run_id)
        resumed = cli("--output", "json", "resume", run_id, "--db", str(db))
        if resumed.rc != 3:
            break
        if resumed.stdout:  # paused for the next approval
            assert resumed.data["state"] == "paused", resumed.stdout
            continue
        _reconcile_by_marker(cli, db, run_id, tmp_path, resumed.error["error"]["message"])
    assert resumed.rc == 0, (point, resumed.rc, resumed.stderr)
    assert resumed.data["state"] == "succeeded"
    assert _marker(tmp_path) == 1, f"{point}: the effect ran {_marker(tmp_path)} times"
    assert (tmp_path / "out" / "x.txt").read_text() == "done\n"
    assert _integrity(db) == "ok"


def _window(db: Path, tmp_path: Path) -> tuple[object, ...]:
    """The durable state a kill left behind, plus whether the effect itself ran."""
    with sqlite3.connect(db) as conn:
        tasks = conn.execute("SELECT task_id, state FROM task_states ORDER BY task_id").fetchall()
        effects = conn.execute("SELECT task_id, status FROM effects ORDER BY task_id").fetchall()
    return (tuple(tasks), tuple(effects), _marker(tmp_path))


def test_every_point_marks_its_own_window(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """No two points are reached with the same state on disk: each one tests something."""
    windows: dict[tuple[object, ...], str] = {}
    for point in POINTS:
        here = tmp_path / point
        here.mkdir()
        db, _run = _crash(cli, here, point)
        window = _window(db, here)
        assert window not in windows, f"{point} and {windows.get(window)} mark one window"
        windows[window] = point
