"""A task's failure ends a run that another task waits in for its approval (spec/dsl.md §6
``failure``, spec/cli.md §9; docs/workflow-language.md *Tasks*).

Under ``failure: stop`` (the default) a failed task fails the run whatever order the tasks
are listed in: a sibling held for its approval — in the same drive, or in a run a crash left
with the failure recorded — ends ``cancelled``, never runs, its
approval is closed (approving it later is refused, exit 5) and its budget reservation given
back. The run used to end ``paused`` when the held task came first, and approving it wrote
the file of a run that could no longer succeed; listed the other way round, nothing was
written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import Cli

DB = ("--db", "r.db")
SAVE = '{ id: save, uses: "action:save", with: { path: out/a.txt, content: hi } }'
BAD = '{ id: bad, uses: "action:bad", with: { that: false, message: nope } }'
ORDERED = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {{ name: {name} }}
spec:
  policy: {{ writableRoots: [out] }}
  actions: {{ save: {{ kind: builtin.write }}, bad: {{ kind: builtin.assert }} }}
  tasks:
    - {first}
    - {second}
"""
# ``save`` (a process, metered by its output limit) and ``gate`` pause the first drive;
# ``bad`` needs ``gate``, so it fails only in the ``resume`` after ``gate`` is approved.
EARLIER = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: earlier }
spec:
  policy: { writableRoots: [out], processAllowlist: [sh] }
  runtime: { budgets: { maxProcessOutputBytes: 1500 } }
  actions:
    save: { kind: builtin.shell.exec, command: /bin/sh,
            args: ["-c", "mkdir -p out && echo hi > out/a.txt"], combinedOutputLimitBytes: 1000 }
    gate: { kind: builtin.write }
    bad: { kind: builtin.assert }
  tasks:
    - { id: save, uses: "action:save" }
    - { id: gate, uses: "action:gate", with: { path: out/gate.txt, content: ok } }
    - { id: bad, uses: "action:bad", needs: [gate], with: { that: false, message: nope } }
"""
# ``bad`` fails as an effect (a missing file): the coordinator killed once its failure is
# durable, before it settles the run, leaves the run with ``save`` still held.
CRASHED = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: crashed }
spec:
  policy: { writableRoots: [out] }
  actions: { save: { kind: builtin.write }, load: { kind: builtin.read } }
  tasks:
    - { id: save, uses: "action:save", with: { path: out/a.txt, content: hi } }
    - { id: bad, uses: "action:load", with: { path: missing.txt } }
"""
CRASH = {"AGENTCTL_CRASH_AT": "coordinator.after_outcome", "AGENTCTL_CRASH_HIT": "1"}


def _json(cli: Cli, *args: str) -> Any:
    got = cli("--output", "json", *args, *DB)
    assert got.rc == 0, got.stdout + got.stderr
    return got.data


def _approval_ids(cli: Cli, run_id: str) -> dict[str, str]:
    listed = _json(cli, "approvals", "list", run_id)["approvals"]
    return {a["taskId"]: a["approvalId"] for a in listed}


def _failed_by_bad(got: Any) -> str:
    """The run id of a run that failed (exit 4) with an error naming ``bad``."""
    assert got.rc == 4, got.stdout + got.stderr
    message = got.error["error"]["message"]
    assert message.startswith("run failed: bad: "), message
    assert "save" not in message, message
    return str(got.error["error"]["runId"])


def _assert_settled(cli: Cli, tmp_path: Path, run_id: str) -> dict[str, str]:
    """``run_id`` failed with ``save`` cancelled before it started; its task states."""
    data = _json(cli, "inspect", run_id)
    assert data["run"]["state"] == "failed"
    states = {t["taskId"]: t["state"] for t in data["tasks"]}
    assert states["save"] == "cancelled" and states["bad"] == "failed", data["tasks"]
    save = next(t for t in data["tasks"] if t["taskId"] == "save")
    assert save["error"] == "not started: the run stopped after a task failed"
    started = [e for e in data["effects"] if e["taskId"] == "save" and e["startedAt"]]
    assert started == [], data["effects"]
    assert data["approvals"] == [] and _approval_ids(cli, run_id) == {}
    assert all(v == 0 for v in data["budget"]["reserved"].values()), data["budget"]
    assert not (tmp_path / "out" / "a.txt").exists()
    return states


def _refused(cli: Cli, approval_id: str) -> None:
    late = cli("--output", "json", "approvals", "approve", approval_id, "--reason", "late", *DB)
    assert late.rc == 5, late.stdout + late.stderr
    assert f"approval {approval_id} is already cancelled" in late.error["error"]["message"]


def test_a_failure_fails_the_run_whatever_the_order(cli: Cli, tmp_path: Path) -> None:
    finals = []
    for name, first, second in (("ab", BAD, SAVE), ("ba", SAVE, BAD)):
        text = ORDERED.format(name=name, first=first, second=second)
        (tmp_path / f"{name}.yaml").write_text(text, encoding="utf-8")
        run_id = _failed_by_bad(cli("--output", "json", "run", f"{name}.yaml", *DB))
        finals.append(_assert_settled(cli, tmp_path, run_id))
        audit = _json(cli, "inspect", run_id)["audit"]
        for event in (e for e in audit if e["eventType"] == "approval.requested"):
            _refused(cli, event["payload"]["approvalId"])  # listed first, save was held
    assert finals[0] == finals[1] == {"save": "cancelled", "bad": "failed"}


def test_after_an_earlier_pause_nothing_runs_until_every_approval_is_decided(
    cli: Cli, tmp_path: Path
) -> None:
    # spec/cli.md §5: a resume finding a task still waiting for its approval returns paused
    # (exit 3) before anything runs: the approved gate (whose success would let bad fail the
    # run) waits too. Once save is decided the run goes on, and bad fails it.
    (tmp_path / "wf.yaml").write_text(EARLIER, encoding="utf-8")
    paused = cli("--output", "json", "run", "wf.yaml", *DB)
    assert paused.rc == 3 and paused.data["state"] == "paused", paused.stdout + paused.stderr
    run_id = paused.data["runId"]
    held = _approval_ids(cli, run_id)
    assert set(held) == {"save", "gate"}
    assert _json(cli, "inspect", run_id)["budget"]["reserved"] == {"processOutputBytes": 1000}
    _json(cli, "approvals", "approve", held["gate"], "--reason", "ok")
    before = _json(cli, "inspect", run_id)
    still = cli("--output", "json", "resume", run_id, *DB)
    assert still.rc == 3 and still.data["state"] == "paused", still.stdout + still.stderr
    assert _json(cli, "inspect", run_id) == before and not (tmp_path / "out").exists()
    _json(cli, "approvals", "approve", held["save"], "--reason", "ok")
    _failed_by_bad(cli("--output", "json", "resume", run_id, *DB))
    states = {t["taskId"]: t["state"] for t in _json(cli, "inspect", run_id)["tasks"]}
    assert states == {"save": "succeeded", "gate": "succeeded", "bad": "failed"}


def test_resume_fails_a_run_left_with_a_failure_and_a_held_task(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(CRASHED, encoding="utf-8")
    killed = cli("--output", "json", "run", "wf.yaml", *DB, env=CRASH)
    assert killed.rc == -9, killed.stderr
    run_id = _json(cli, "runs", "list")["runs"][0]["runId"]
    left = _json(cli, "inspect", run_id)
    assert {t["taskId"]: t["state"] for t in left["tasks"]} == {
        "save": "waiting_for_approval",
        "bad": "failed",
    }
    held = _approval_ids(cli, run_id)["save"]
    _failed_by_bad(cli("--output", "json", "resume", run_id, *DB))
    _assert_settled(cli, tmp_path, run_id)
    _refused(cli, held)
