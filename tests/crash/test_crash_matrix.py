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

POINTS = [
    "coordinator.after_requested",
    "coordinator.after_started",
    "coordinator.after_result",
    "coordinator.after_outcome",
    "coordinator.before_batch_commit",
    "worker.before_execute",
    "worker.before_result",
]

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


@pytest.mark.parametrize("point", POINTS)
def test_crash_then_resume(point: str, cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    wf = write_workflow(WORKFLOW)
    db = tmp_path / "state" / "r.db"
    first = cli(
        "--output", "json", "run", str(wf), "--db", str(db), env={"AGENTCTL_CRASH_AT": point}
    )
    if point.startswith("coordinator."):
        assert first.rc == -9, (first.rc, first.stderr)
    else:
        # A lost worker leaves the effect uncertain: the run stays resumable, exit 4.
        assert first.rc == 4, (first.rc, first.stderr)
        assert "uncertain" in first.error["error"]["message"]
    assert _integrity(db) == "ok"
    run_id = _run_id(cli, db)
    ran_before = _marker(tmp_path)
    assert ran_before <= 1

    resumed = cli("--output", "json", "resume", run_id, "--db", str(db))
    if resumed.rc == 3:
        message = resumed.error["error"]["message"]
        effects = cli("--output", "json", "effects", "list", run_id, "--db", str(db)).data[
            "effects"
        ]
        uncertain = [e for e in effects if e["status"] == "uncertain"]
        assert len(uncertain) == 1 and uncertain[0]["effectId"] in message
        effect_id = uncertain[0]["effectId"]
        if _marker(tmp_path) == 0:
            rec = cli(
                "effects",
                "reconcile",
                effect_id,
                "--status",
                "not-applied",
                "--reason",
                "marker shows it never ran",
                "--db",
                str(db),
            )
        else:
            result_file = tmp_path / "result.json"
            result_file.write_text(json.dumps(APPLIED_RESULT))
            rec = cli(
                "effects",
                "reconcile",
                effect_id,
                "--status",
                "applied",
                "--reason",
                "marker shows it ran",
                "--result-file",
                str(result_file),
                "--db",
                str(db),
            )
        assert rec.rc == 0, rec.stderr
        resumed = cli("--output", "json", "resume", run_id, "--db", str(db))
    assert resumed.rc == 0, (point, resumed.rc, resumed.stderr)
    assert resumed.data["state"] == "succeeded"
    assert _marker(tmp_path) == 1, f"{point}: the effect ran {_marker(tmp_path)} times"
    assert (tmp_path / "out" / "x.txt").read_text() == "done\n"
    assert _integrity(db) == "ok"
