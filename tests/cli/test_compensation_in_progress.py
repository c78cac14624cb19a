"""A compensation run that has not ended holds its inverses: a second ``compensate`` of the
same source must not plan them again (spec/cli.md §5 "already compensated skipped", spec/dsl.md
"compensated effects are never repeated").

The inverse appends to ``out/undo.log`` from a real subprocess, so the tests count how many
times it ran. ``spec.compensation.approval: always`` pauses each compensation run before its
inverse runs: the window in which a second ``compensate`` used to plan (and, once approved,
run) the same inverse again.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Cli

WORKFLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: dupcomp }
spec:
  compensation: { approval: always }
  policy: { approval: never, writableRoots: [out], processAllowlist: [sh] }
  actions:
    save: { kind: builtin.write }
    undo: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo undo >> out/undo.log"] }
    check: { kind: builtin.assert }
  tasks:
    - id: make
      uses: action:save
      with: { path: out/r.txt, content: made }
      compensate: { uses: action:undo }
    - id: verify
      uses: action:check
      needs: [make]
      with: { that: false, message: boom }
"""


def _failed_source(cli: Cli, ws: Path) -> tuple[Path, str]:
    ws.mkdir()
    (ws / "wf.yaml").write_text(WORKFLOW)
    db = ws.parent / "state" / "r.db"
    failed = cli("--output", "json", "run", str(ws / "wf.yaml"), "--db", str(db))
    assert failed.rc == 4, failed.stderr
    return db, str(failed.error["error"]["runId"])


def _paused_compensation(cli: Cli, db: Path, source: str) -> str:
    held = cli("--output", "json", "compensate", source, "--db", str(db))
    assert held.rc == 3 and held.data["state"] == "paused", held.stderr
    return str(held.data["runId"])


def _approve_and_resume(cli: Cli, db: Path, run_id: str) -> None:
    listed = cli("--output", "json", "approvals", "list", run_id, "--db", str(db)).data
    for approval in listed["approvals"]:
        asked = ("approvals", "approve", approval["approvalId"], "--reason", "ok")
        assert cli("--output", "json", *asked, "--db", str(db)).rc == 0
    resumed = cli("--output", "json", "resume", run_id, "--db", str(db))
    assert resumed.rc == 0, resumed.stderr


def _undone(ws: Path) -> list[str]:
    log = ws / "out" / "undo.log"
    return log.read_text().split() if log.exists() else []


def _runs(cli: Cli, db: Path) -> list[str]:
    return [
        r["runId"] for r in cli("--output", "json", "runs", "list", "--db", str(db)).data["runs"]
    ]


def test_a_second_compensate_is_blocked_while_the_first_holds_the_inverse(
    cli: Cli, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    db, source = _failed_source(cli, ws)
    first = _paused_compensation(cli, db, source)
    # --plan and a real compensate give the same answer: blocked, naming the paused run.
    plan = cli("--output", "json", "compensate", source, "--plan", "--db", str(db))
    assert plan.rc == 3, plan.stderr
    assert plan.data["tasks"] == [] and not plan.data["executable"]
    [block] = plan.data["blocked"]
    assert (block["taskId"], block["rule"]) == ("make", "compensation_in_progress")
    assert first in block["message"]
    before = _runs(cli, db)
    again = cli("--output", "json", "compensate", source, "--db", str(db))
    assert again.rc == 3, again.stderr
    assert json.loads(again.stdout)["kind"] == "CompensationPlan"
    assert again.data["blocked"] == [block]
    assert _runs(cli, db) == before  # a blocked plan creates no run
    _approve_and_resume(cli, db, first)
    assert _undone(ws) == ["undo"]
    done = cli("--output", "json", "compensate", source, "--plan", "--db", str(db))
    assert done.rc == 0 and done.data["blocked"] == [] and done.data["tasks"] == []
    assert len(done.data["alreadyCompensatedEffects"]) == 1


def test_a_compensation_run_that_ended_without_compensating_blocks_nothing(
    cli: Cli, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    db, source = _failed_source(cli, ws)
    first = _paused_compensation(cli, db, source)
    cancelled = cli("--output", "json", "cancel", first, "--db", str(db))
    assert cancelled.rc == 0, cancelled.stderr
    # Requested only: the paused compensation run is still in progress until it is driven.
    plan = cli("--output", "json", "compensate", source, "--plan", "--db", str(db))
    assert plan.rc == 3 and not plan.data["executable"], plan.stdout
    ended = cli("--output", "json", "resume", first, "--db", str(db))
    assert ended.rc == 130 and ended.data["state"] == "cancelled", ended.stderr
    plan = cli("--output", "json", "compensate", source, "--plan", "--db", str(db))
    assert plan.rc == 0 and plan.data["executable"], plan.stdout
    assert [t["sourceTaskId"] for t in plan.data["tasks"]] == ["make"]
    second = _paused_compensation(cli, db, source)
    _approve_and_resume(cli, db, second)
    assert _undone(ws) == ["undo"]


CUT_OFF = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: cutoff }
spec:
  policy: { approval: never, writableRoots: [out], processAllowlist: [sh] }
  actions:
    save: { kind: builtin.write }
    undo:
      kind: builtin.shell.exec
      command: /bin/sh
      args: ["-c", "echo undo >> out/undo.log; sleep 5"]
  tasks:
    - { id: make, uses: action:save, with: { path: out/r.txt, content: made },
        compensate: { uses: action:undo, timeoutSeconds: 1 } }
"""


def test_an_inverse_cut_off_in_an_ended_compensation_run_is_settled_before_planning_again(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "wf.yaml").write_text(CUT_OFF)
    made = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert made.rc == 0, made.stderr
    source = made.data["runId"]
    # The inverse times out: it ran (the log says so), its outcome is unknown.
    cut = cli("--output", "json", "compensate", source, "--db", "r.db")
    assert cut.rc == 4, cut.stderr
    first = str(cut.error["error"]["runId"])
    assert cli("--output", "json", "cancel", first, "--db", "r.db").rc == 0  # as its hint says
    plan = cli("--output", "json", "compensate", source, "--plan", "--db", "r.db")
    assert plan.rc == 3 and not plan.data["executable"], plan.stdout
    [block] = plan.data["blocked"]
    assert (block["taskId"], block["rule"]) == ("make", "compensation_in_progress")
    [inverse] = cli("--output", "json", "effects", "list", first, "--db", "r.db").data["effects"]
    assert inverse["effectId"] in block["message"] and "reconcile it first" in block["message"]
    again = cli("--output", "json", "compensate", source, "--db", "r.db")
    assert again.rc == 3, again.stderr
    assert (tmp_path / "out" / "undo.log").read_text().split() == ["undo"]  # never twice
    # Reconciled not applied, it undid nothing: the inverse may be planned again.
    settle = ("effects", "reconcile", inverse["effectId"], "--status", "not-applied")
    assert cli(*settle, "--reason", "checked", "--db", "r.db").rc == 0
    plan = cli("--output", "json", "compensate", source, "--plan", "--db", "r.db")
    assert plan.rc == 0 and plan.data["executable"], plan.stdout
