"""Run lifecycle from the outside: cancel from another shell, signals, deadlines, ownership."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil

from tests.conftest import StartCli

# A sleep length unique to this test process, so the process scans below never see the sleeps
# of another test suite running on the same machine.
NAP = f"37.{os.getpid()}"
SLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: slow }
spec:
  policy: { approval: never, processAllowlist: [sh] }
  actions:
    nap:
      kind: builtin.shell.exec
      command: /bin/sh
      args: ["-c", "sleep NAP & wait"]
      timeoutSeconds: 120
  tasks:
    - { id: nap, uses: "action:nap" }
""".replace("NAP", NAP)


def _slow_run(
    cli, start_cli: StartCli, write_workflow, db: Path
) -> tuple[subprocess.Popen[str], str]:  # type: ignore[no-untyped-def]
    """``agentctl run`` of SLOW in the background, once its sleep runs: the process, the run id."""
    proc = start_cli("--output", "json", "run", str(write_workflow(SLOW)), "--db", str(db))
    return proc, _wait_for_running(cli, db)


def _wait_for_running(cli, db: Path) -> str:  # type: ignore[no-untyped-def]
    """The run id once its effect has been dispatched (the sleep exists)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if _sleepers():
            listed = cli("--output", "json", "runs", "list", "--db", str(db))
            if listed.rc == 0 and listed.data["runs"]:
                return str(listed.data["runs"][0]["runId"])
        time.sleep(0.05)
    raise AssertionError("the run never dispatched its effect")


def _sleepers() -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info.get("cmdline") or []
        if cmd[:2] == ["sleep", NAP]:
            found.append(proc)
    return found


def _state(cli, db: Path, run_id: str) -> dict:  # type: ignore[no-untyped-def,type-arg]
    data = cli("--output", "json", "inspect", run_id, "--db", str(db)).data
    return {
        "run": data["run"]["state"],
        "tasks": [t["state"] for t in data["tasks"]],
        "effects": [e["status"] for e in data["effects"]],
    }


# A step in flight when `agentctl cancel` lands (it waits for the test's `go` file, so the
# cancel lands inside it however slow the machine), then one that must never start.
STEPS = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: steps }
spec:
  policy: { approval: never, processAllowlist: [sh] }
  actions:
    step:
      kind: builtin.shell.exec
      command: /bin/sh
      args: ["-c", "echo x >> started; while [ ! -e go ]; do sleep 0.05; done; echo done >> started"]
      timeoutSeconds: 120
  tasks:
    - { id: first, uses: "action:step" }
    - { id: second, uses: "action:step", needs: [first] }
"""


def test_cancel_from_another_shell_lets_the_step_in_flight_finish(
    cli, start_cli, write_workflow, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    # spec/cli.md §6: `cancel` sets the flag and the driver honours it at the next boundary:
    # the step in flight ends and is recorded (a signal, by contrast, kills it); the next one
    # never starts; the run ends cancelled.
    db = tmp_path / "r.db"
    proc, run_id = _start_steps_mid_first(cli, start_cli, write_workflow, db)
    asked = cli("--output", "json", "cancel", run_id, "--db", str(db))
    assert asked.rc == 0 and asked.data == {"runId": run_id, "requested": True}
    (tmp_path / "go").touch()  # the step in flight may end now
    _assert_only_the_first_step_ran(cli, proc, db, run_id)
    again = cli("--output", "json", "cancel", run_id, "--db", str(db))
    assert again.rc == 5  # only running or paused runs can be cancelled
    assert again.error["error"]["runId"] == run_id  # the run it concerns, for a script


def test_no_step_starts_after_a_cancel_that_returned(
    cli, start_cli, write_workflow, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    # The coordinator is stopped while the cancel lands and while the first step ends, so
    # its poll of the flag comes late: the transaction that would start the second step
    # reads the flag itself (serialized with the flag's write) and starts nothing.
    db, started = tmp_path / "r.db", tmp_path / "started"
    proc, run_id = _start_steps_mid_first(cli, start_cli, write_workflow, db)
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        assert cli("--output", "json", "cancel", run_id, "--db", str(db)).rc == 0
        (tmp_path / "go").touch()
        _wait_for_line(started, "done", None)  # the first step ended after the cancel
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    _assert_only_the_first_step_ran(cli, proc, db, run_id)


def test_a_cancel_during_the_last_step_leaves_no_boundary_and_the_run_ends_as_it_decides(
    cli, start_cli, write_workflow, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    # docs/cli.md, `cancel RUN`: with nothing left to start, the in-flight step's outcome ends
    # the run; the request stays in its audit.
    db = tmp_path / "r.db"
    proc, run_id = _start_steps_mid_first(cli, start_cli, write_workflow, db, last=True)
    assert cli("--output", "json", "cancel", run_id, "--db", str(db)).rc == 0
    (tmp_path / "go").touch()
    out, _err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and json.loads(out)["data"]["state"] == "succeeded"
    assert _state(cli, db, run_id) == {
        "run": "succeeded",
        "tasks": ["succeeded"],
        "effects": ["succeeded"],
    }
    audit = cli("--output", "json", "inspect", run_id, "--db", str(db)).data["audit"]
    assert "run.cancellation_requested" in [e["eventType"] for e in audit]


def _start_steps_mid_first(cli, start_cli, write_workflow, db: Path, *, last: bool = False):  # type: ignore[no-untyped-def]
    """``agentctl run`` of STEPS (``last``: its first step alone) in the background, returned
    once its first step runs (it waits for the file ``go`` beside ``db``): the process and
    the run's id."""
    text = STEPS.split("    - { id: second")[0] if last else STEPS
    proc = start_cli("--output", "json", "run", str(write_workflow(text)), "--db", str(db))
    _wait_for_line(db.parent / "started", "x", proc)
    run_id = cli("--output", "json", "runs", "list", "--db", str(db)).data["runs"][0]["runId"]
    return proc, str(run_id)


def _wait_for_line(path: Path, line: str, proc: subprocess.Popen[str] | None) -> None:
    deadline = time.monotonic() + 60
    while line not in (path.read_text().split() if path.exists() else []):
        assert time.monotonic() < deadline, f"{line!r} never appeared in {path}"
        assert proc is None or proc.poll() is None, proc.communicate()
        time.sleep(0.05)


def _assert_only_the_first_step_ran(cli, proc, db: Path, run_id: str) -> None:  # type: ignore[no-untyped-def]
    out, _err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert json.loads(out)["data"]["state"] == "cancelled"
    assert (db.parent / "started").read_text() == "x\ndone\n"  # the second never started
    assert _state(cli, db, run_id) == {
        "run": "cancelled",
        "tasks": ["succeeded", "cancelled"],
        "effects": ["succeeded"],
    }


def test_cancel_of_a_run_whose_coordinator_was_killed_ends_it_at_once(
    cli, start_cli, write_workflow, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "r.db"
    proc, run_id = _slow_run(cli, start_cli, write_workflow, db)
    proc.kill()  # kill -9: no chance to release its lease or mark anything
    proc.communicate(timeout=10)
    assert _state(cli, db, run_id)["run"] == "running"
    asked = cli("--output", "json", "cancel", run_id, "--db", str(db))
    assert asked.rc == 0 and asked.data == {"runId": run_id, "requested": True}
    assert _state(cli, db, run_id) == {
        "run": "cancelled",
        "tasks": ["cancelled"],
        "effects": ["uncertain"],  # it may have had its effect: an operator reconciles it
    }
    shown = cli("--output", "json", "inspect", run_id, "--db", str(db)).data
    assert shown["run"]["cancellationRequested"] is True
    events = [e["eventType"] for e in shown["audit"]]
    assert "run.cancellation_requested" in events
    assert cli("--output", "json", "resume", run_id, "--db", str(db)).rc == 4  # terminal
    assert cli("--output", "json", "cancel", run_id, "--db", str(db)).rc == 5
    for sleeper in _sleepers():  # the orphaned worker's child, if it outlived the kill
        sleeper.kill()


def test_sigterm_cancels_like_agentctl_cancel(
    cli, start_cli, write_workflow, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "r.db"
    proc, run_id = _slow_run(cli, start_cli, write_workflow, db)
    proc.send_signal(signal.SIGTERM)
    out, _err = proc.communicate(timeout=10)
    assert proc.returncode == 130
    assert json.loads(out)["data"]["state"] == "cancelled"
    assert _sleepers() == []
    assert _state(cli, db, run_id)["effects"] == ["uncertain"]


def test_timeout_seconds_cancels_the_run(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    wf = write_workflow(SLOW)
    db = tmp_path / "r.db"
    done = cli("--output", "json", "run", str(wf), "--db", str(db), "--timeout-seconds", "1")
    assert done.rc == 130
    assert done.data["state"] == "cancelled"
    assert _sleepers() == []


def test_second_driver_of_a_live_run_is_refused(
    cli, start_cli, write_workflow, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "r.db"
    proc, run_id = _slow_run(cli, start_cli, write_workflow, db)
    second = cli("--output", "json", "resume", run_id, "--db", str(db))
    assert second.rc == 5
    assert "live coordinator" in second.error["error"]["message"]
    proc.send_signal(signal.SIGTERM)  # cuts the 37 s step (a `cancel` would let it end)
    proc.communicate(timeout=10)
    assert proc.returncode == 130


def test_an_effect_a_live_coordinator_executes_is_not_reconciled(
    cli, start_cli, write_workflow, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "r.db"
    proc, run_id = _slow_run(cli, start_cli, write_workflow, db)
    [effect] = cli("--output", "json", "effects", "list", run_id, "--db", str(db)).data["effects"]
    assert effect["status"] == "started"
    settle = ("effects", "reconcile", effect["effectId"], "--db", str(db))
    early = cli("--output", "json", *settle, "--status", "not-applied", "--reason", "too soon")
    assert early.rc == 5  # its coordinator will record the outcome itself
    assert "live coordinator" in early.error["error"]["message"]
    shown = cli("--output", "json", "effects", "inspect", effect["effectId"], "--db", str(db))
    assert shown.data["reconciliations"] == []  # nothing was recorded
    proc.kill()  # now nothing drives the run: its started effect is the operator's to settle
    proc.communicate(timeout=10)
    late = cli("--output", "json", *settle, "--status", "not-applied", "--reason", "it crashed")
    assert late.rc == 0, late.stderr
    for sleeper in _sleepers():  # the orphaned worker's child, if it outlived the kill
        sleeper.kill()


HELLO = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: pair }
spec:
  inputs: { name: default }
  policy: { approval: never, processAllowlist: [sh], writableRoots: [out] }
  actions:
    work: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "sleep 0.3; echo ok"] }
    save: { kind: builtin.write }
  tasks:
    - { id: work, uses: "action:work" }
    - { id: save, uses: "action:save", needs: [work],
        with: { path: "out/${{ inputs.name }}.txt", content: "${{ tasks.work.output.stdout }}" } }
"""


def test_two_runs_share_one_database(start_cli: StartCli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    wf = write_workflow(HELLO)
    db = tmp_path / "shared.db"
    run = ("--output", "json", "run", str(wf), "--db", str(db), "--input")
    procs = [start_cli(*run, f"name={n}") for n in ("a", "b")]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
    ids = {json.loads(o[0])["data"]["runId"] for o in outs}
    assert len(ids) == 2
    assert (tmp_path / "out" / "a.txt").read_text() == "ok\n"
    assert (tmp_path / "out" / "b.txt").read_text() == "ok\n"


def test_killed_coordinator_leaves_no_worker_tree_and_an_uncertain_effect(
    cli, start_cli, write_workflow, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "r.db"
    proc, run_id = _slow_run(cli, start_cli, write_workflow, db)
    proc.kill()
    proc.communicate(timeout=10)
    deadline = time.monotonic() + 10
    while _sleepers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _sleepers() == [], "a worker outlived its coordinator"
    resumed = cli("--output", "json", "resume", run_id, "--db", str(db))
    assert resumed.rc == 3
    [effect] = cli("--output", "json", "effects", "list", run_id, "--db", str(db)).data["effects"]
    assert effect["status"] == "uncertain"
    assert effect["effectId"] in resumed.error["error"]["message"]
    assert "reconcile" in resumed.stderr


def test_a_hung_worker_is_killed_and_its_effect_is_uncertain(
    start_cli: StartCli, write_workflow, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    wf = write_workflow(SLOW.replace("timeoutSeconds: 120", "timeoutSeconds: 1"))
    db = tmp_path / "r.db"
    grace = {"AGENTCTL_ANSWER_GRACE_SECONDS": "1"}
    proc = start_cli("--output", "json", "run", str(wf), "--db", str(db), env=grace)
    deadline = time.monotonic() + 30
    while not _sleepers() and time.monotonic() < deadline:
        time.sleep(0.02)
    [sleeper] = _sleepers()
    worker = psutil.Process(sleeper.ppid()).parent()  # sh → worker
    assert worker is not None and "agentctl.workers" in " ".join(worker.cmdline())
    worker.suspend()  # the worker can no longer answer, nor enforce the 1 s timeout
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 4, err
    assert "uncertain" in err
    assert not worker.is_running() or worker.status() == psutil.STATUS_ZOMBIE
    assert _sleepers() == []
