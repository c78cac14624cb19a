"""Repair and retry from a run parked on an uncertain effect (spec/cli.md §5, §11).

A shell step past its ``timeoutSeconds`` leaves its effect uncertain; the driver settles the
run as ``running`` with the task ``waiting_for_effect`` and exits 4, and no coordinator holds
it any more. Such a run is a repair/retry source: before the reconciliation the closure rule
``unreconciled_effect`` blocks, after a not-applied one a new run executes the task with a
fresh effect. A run that something still drives, a paused run or a run merely ``running``
(a crashed coordinator, no task waiting on an effect) stays refused ``source_not_terminal``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agentctl.ledger.owners import process_start_time

# ``s`` sleeps past its timeout until ``fast.flag`` exists: the same workflow (same digest, so
# retry applies too) then succeeds quickly.
FLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: parked }
spec:
  policy: { approval: never, processAllowlist: [sh] }
  actions:
    a: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo a >> marker.txt"] }
    slow:
      kind: builtin.shell.exec
      command: /bin/sh
      args: ["-c", "echo s >> marker.txt; test -f fast.flag || sleep 30"]
      timeoutSeconds: 1
    c: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo c >> marker.txt"] }
  tasks:
    - { id: a, uses: "action:a" }
    - { id: s, uses: "action:slow", needs: [a] }
    - { id: c, uses: "action:c", needs: [s] }
"""

PAUSED = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: parked }
spec:
  policy: { writableRoots: [out] }
  actions:
    save: { kind: builtin.write }
  tasks:
    - { id: w, uses: "action:save", with: { path: out/x.txt, content: "x" } }
"""


def _marker(ws: Path) -> list[str]:
    path = ws / "marker.txt"
    return path.read_text().split() if path.exists() else []


def _park(cli, ws: Path) -> tuple[Path, Path, str, str]:  # type: ignore[no-untyped-def]
    """Run FLOW until ``s`` times out: the workflow, db, run id and the uncertain effect."""
    ws.mkdir(parents=True, exist_ok=True)
    wf, db = ws / "wf.yaml", ws.parent / "state" / "r.db"
    wf.write_text(FLOW)
    first = cli("--output", "json", "run", str(wf), "--db", str(db), cwd=ws)
    assert first.rc == 4, first.stderr
    run_id = str(first.error["error"]["runId"])
    data = _inspect(cli, db, run_id)
    assert data["run"]["state"] == "running"
    assert {t["taskId"]: t["state"] for t in data["tasks"]}["s"] == "waiting_for_effect"
    [effect] = [e for e in data["effects"] if e["taskId"] == "s"]
    assert effect["status"] == "uncertain"
    return wf, db, run_id, str(effect["effectId"])


def _inspect(cli, db: Path, run_id: str):  # type: ignore[no-untyped-def]
    got = cli("--output", "json", "inspect", run_id, "--db", str(db))
    assert got.rc == 0, got.stderr
    return got.data


def _rules(plan) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return [(b["taskId"], b["rule"]) for b in plan.data["blockedReuse"]]


def _reconcile_not_applied(cli, db: Path, effect_id: str) -> None:  # type: ignore[no-untyped-def]
    args = ("effects", "reconcile", effect_id, "--status", "not-applied", "--reason", "killed")
    got = cli("--output", "json", *args, "--db", str(db))
    assert got.rc == 0, got.stderr


def _assert_fresh_effect(cli, db: Path, run_id: str, old_effect: str) -> None:  # type: ignore[no-untyped-def]
    data = _inspect(cli, db, run_id)
    tasks = {t["taskId"]: t for t in data["tasks"]}
    assert tasks["a"]["disposition"] == "reused"
    assert tasks["s"]["disposition"] == "executed" and tasks["s"]["state"] == "succeeded"
    [effect] = [e for e in data["effects"] if e["taskId"] == "s"]
    assert effect["status"] == "succeeded" and effect["effectId"] != old_effect


@pytest.mark.parametrize("how", [("repair", "--from", "s"), ("retry", "--failed")])
def test_a_parked_run_is_a_source_after_reconciliation(cli, tmp_path: Path, how) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    wf, db, source, effect = _park(cli, ws)
    verb, *flags = how
    derive = (verb, str(wf), source, *flags, "--db", str(db))
    plan = cli("--output", "json", *derive, "--plan", cwd=ws)
    assert plan.rc == 3, plan.stderr
    assert _rules(plan) == [("s", "unreconciled_effect")]
    _reconcile_not_applied(cli, db, effect)
    (ws / "fast.flag").write_text("")
    done = cli("--output", "json", *derive, cwd=ws)
    assert done.rc == 0, done.stderr
    assert done.data["state"] == "succeeded" and done.data["sourceRunId"] == source
    assert done.data["executedTasks"] == ["s", "c"]
    assert _marker(ws) == ["a", "s", "s", "c"]
    _assert_fresh_effect(cli, db, done.data["runId"], effect)
    # The source is left as it was, but it is not driven again: its work was taken over.
    assert _inspect(cli, db, source)["run"]["state"] == "running"
    again = cli("--output", "json", "resume", source, "--db", str(db), cwd=ws)
    assert again.rc == 4, again.stderr
    assert f"taken over by {verb} run {done.data['runId']}" in again.error["error"]["message"]
    assert _marker(ws) == ["a", "s", "s", "c"]  # nothing ran a second time


def test_a_parked_run_with_a_live_owner_is_refused(cli, ledger_target, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    wf, db, source, effect = _park(cli, ws)
    _reconcile_not_applied(cli, db, effect)
    plan = ("--output", "json", "repair", str(wf), source, "--from", "s", "--plan")
    owner = subprocess.Popen(["sleep", "60"])
    try:  # a live process holds the lease: it drives the run, whatever its tasks show
        lease = "UPDATE runs SET owner_pid = ?, owner_create_time = ? WHERE run_id = ?"
        ledger_target.sql(db, lease, (owner.pid, process_start_time(owner.pid), source))
        held = cli(*plan, "--db", str(db), cwd=ws)
        assert held.rc == 3, held.stderr
        assert _rules(held) == [("", "source_not_terminal")]
    finally:
        owner.kill()
        owner.wait()
    freed = cli(*plan, "--db", str(db), cwd=ws)
    assert freed.rc == 0, freed.stderr
    assert freed.data["compatible"] is True


def test_a_run_merely_running_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    ws.mkdir()
    wf, db = ws / "wf.yaml", tmp_path / "state" / "r.db"
    wf.write_text(FLOW)
    crash = {"AGENTCTL_CRASH_AT": "coordinator.after_started"}  # dies with a's effect started
    died = cli("--output", "json", "run", str(wf), "--db", str(db), cwd=ws, env=crash)
    assert died.rc != 0
    [run] = cli("--output", "json", "runs", "list", "--db", str(db)).data["runs"]
    assert run["state"] == "running"
    repair = ("repair", str(wf), run["runId"], "--from", "a", "--plan", "--db", str(db))
    plan = cli("--output", "json", *repair)
    assert plan.rc == 3, plan.stderr
    assert _rules(plan) == [("", "source_not_terminal")]


def test_a_paused_run_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    wf = tmp_path / "wf.yaml"
    wf.write_text(PAUSED)
    paused = cli("--output", "json", "run", str(wf))
    assert paused.rc == 3 and paused.data["state"] == "paused", paused.stderr
    source = paused.data["runId"]
    for args in (("repair", "--from", "w"), ("retry", "--failed")):
        verb, *flags = args
        plan = cli("--output", "json", verb, str(wf), source, *flags, "--plan")
        assert plan.rc == 3, plan.stderr
        assert _rules(plan) == [("", "source_not_terminal")]


@pytest.mark.parametrize("how", [("repair", "--from", "a"), ("retry", "--failed")])
def test_a_crashed_run_is_parked_by_resume(cli, tmp_path: Path, how) -> None:  # type: ignore[no-untyped-def]
    """A coordinator killed mid-effect: the resume that finds the effect uncertain parks its
    task ``waiting_for_effect``, as a timeout does, so the run is then a source like one."""
    ws = tmp_path / "ws"
    ws.mkdir()
    wf, db = ws / "wf.yaml", tmp_path / "state" / "r.db"
    wf.write_text(FLOW)
    (ws / "fast.flag").write_text("")
    crash = {"AGENTCTL_CRASH_AT": "coordinator.after_started"}  # dies with a's effect started
    died = cli("--output", "json", "run", str(wf), "--db", str(db), cwd=ws, env=crash)
    assert died.rc != 0
    [run] = cli("--output", "json", "runs", "list", "--db", str(db)).data["runs"]
    source = str(run["runId"])
    blocked = cli("--output", "json", "resume", source, "--db", str(db), cwd=ws)
    assert blocked.rc == 3, blocked.stderr
    data = _inspect(cli, db, source)
    task = {t["taskId"]: t for t in data["tasks"]}["a"]
    assert task["state"] == "waiting_for_effect"
    assert str(task["error"]).startswith("effect outcome uncertain: ")
    [effect] = [e for e in data["effects"] if e["taskId"] == "a"]
    assert effect["status"] == "uncertain"
    _reconcile_not_applied(cli, db, str(effect["effectId"]))
    verb, *flags = how
    derive = (verb, str(wf), source, *flags, "--db", str(db))
    plan = cli("--output", "json", *derive, "--plan", cwd=ws)
    assert plan.rc == 0 and plan.data["compatible"] is True, plan.stdout
    done = cli("--output", "json", *derive, cwd=ws)
    assert done.rc == 0, done.stderr
    assert done.data["state"] == "succeeded" and done.data["executedTasks"] == ["a", "s", "c"]
