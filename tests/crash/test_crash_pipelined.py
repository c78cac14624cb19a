"""Kill-and-recover under the pipelined commit: a chain of effects, killed at every window.

In a chain, an effect's outcome and its task's completion commit in the same transaction as
the next task's ``requested``/``started`` rows (ADR 0011). Three shell effects in a chain each
append their own line to a marker file; the coordinator SIGKILLs itself at every hit of every
coordinator point. After each kill: every effect that ran is durable as confirmed or as
started (then uncertain), every confirmed one ran, and at the k-th ``started`` the effect
before it is already confirmed (one transaction). Resuming — with the operator reconciling an
uncertain effect by the marker — completes the run with every line exactly once.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agentctl.crashpoints import CrashPoint

STEPS = ("e1", "e2", "e3")
_MARK = """\
    mark_{tag}:
      kind: builtin.shell.exec
      command: /bin/sh
      args: ["-c", "echo {tag} >> marker.txt; echo done"]
      timeoutSeconds: 30
"""
WORKFLOW = (
    """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: pipelined }
spec:
  policy: { approval: never, processAllowlist: [sh] }
  actions:
"""
    + "".join(_MARK.format(tag=tag) for tag in STEPS)
    + """\
  tasks:
    - { id: e1, uses: "action:mark_e1" }
    - { id: e2, uses: "action:mark_e2", needs: [e1] }
    - { id: e3, uses: "action:mark_e3", needs: [e2] }
"""
)
APPLIED = {"status": "changed", "changed": True, "exitCode": 0, "stdout": "done\n", "stderr": ""}
KILLS = [
    *[(CrashPoint.AFTER_STARTED.value, hit) for hit in (1, 2, 3)],
    *[(CrashPoint.AFTER_RESULT.value, hit) for hit in (1, 2, 3)],
    (CrashPoint.AFTER_OUTCOME.value, 1),
]


def _ran(ws: Path) -> list[str]:
    path = ws / "marker.txt"
    return path.read_text().split() if path.exists() else []


def _effects(db: Path) -> dict[str, list[str]]:
    """Task id → statuses of its effects, oldest first."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT task_id, status FROM effects ORDER BY rowid").fetchall()
    found: dict[str, list[str]] = {}
    for task_id, status in rows:
        found.setdefault(task_id, []).append(status)
    return found


def _check_window(db: Path, ran: list[str], point: str, hit: int) -> None:
    effects = _effects(db)
    confirmed = {t for t, s in effects.items() if s[-1] == "succeeded"}
    started = {t for t, s in effects.items() if s[-1] == "started"}
    assert confirmed <= set(ran), "a confirmed outcome names an effect that never ran"
    assert set(ran) <= confirmed | started, "an effect ran but nothing durable says so"
    if point == CrashPoint.AFTER_STARTED.value:
        # The k-th start committed with the (k-1)-th outcome: nothing between them is lost.
        assert (confirmed, started) == (set(STEPS[: hit - 1]), {STEPS[hit - 1]})
    if point == CrashPoint.AFTER_RESULT.value:
        assert (confirmed, started) == (set(STEPS[: hit - 1]), {STEPS[hit - 1]})
        assert ran == list(STEPS[:hit])
    if point == CrashPoint.AFTER_OUTCOME.value:  # the last outcome, committed alone
        assert confirmed == set(STEPS) and started == set()


def _reconcile(cli, db: Path, run_id: str, ws: Path) -> None:  # type: ignore[no-untyped-def]
    listed = cli("--output", "json", "effects", "list", run_id, "--db", str(db)).data["effects"]
    (effect,) = [e for e in listed if e["status"] == "uncertain"]
    args = ["effects", "reconcile", effect["effectId"], "--db", str(db)]
    if effect["taskId"] in _ran(ws):
        (ws / "result.json").write_text(json.dumps(APPLIED))
        args += ["--status", "applied", "--reason", "its marker line is there"]
        args += ["--result-file", str(ws / "result.json")]
    else:
        args += ["--status", "not-applied", "--reason", "its marker line is missing"]
    assert cli(*args).rc == 0


@pytest.mark.parametrize(("point", "hit"), KILLS)
def test_kill_in_a_pipelined_chain_then_resume(point: str, hit: int, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    db = tmp_path / "state" / "r.db"
    kill = {"AGENTCTL_CRASH_AT": point, "AGENTCTL_CRASH_HIT": str(hit)}
    first = cli("--output", "json", "run", "wf.yaml", "--db", str(db), cwd=tmp_path, env=kill)
    assert first.rc == -9, (first.rc, first.stderr)
    _check_window(db, _ran(tmp_path), point, hit)
    run_id = cli("--output", "json", "runs", "list", "--db", str(db)).data["runs"][0]["runId"]
    for _round in range(3):
        resumed = cli("--output", "json", "resume", run_id, "--db", str(db))
        if resumed.rc != 3:
            break
        _reconcile(cli, db, run_id, tmp_path)
    assert resumed.rc == 0, (point, hit, resumed.stderr)
    assert sorted(_ran(tmp_path)) == list(STEPS), "an effect ran twice or never"
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_chain_step_commits_its_predecessor_with_its_own_start(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The checkpoint of each later start lists the completion it carried: one transaction."""
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    db = tmp_path / "r.db"
    ran = cli("--output", "json", "run", "wf.yaml", "--db", str(db), cwd=tmp_path)
    assert ran.rc == 0, ran.stderr
    shown = cli("--output", "json", "inspect", ran.data["runId"], "--db", str(db)).data
    carried = [
        ([t["taskId"] for t in c["state"]["tasks"]], [t["taskId"] for t in c["state"]["committed"]])
        for c in shown["checkpoints"]
        if c["state"].get("event") == "effects.requested" and "committed" in c["state"]
    ]
    assert carried == [(["e2"], ["e1"]), (["e3"], ["e2"])]
