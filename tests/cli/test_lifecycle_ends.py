"""How runs end, seen from the outside: what a terminal run leaves and what the CLI prints.

- A run that ends ``cancelled`` (``--timeout-seconds``, SIGINT, ``agentctl cancel`` from
  another shell) has every task terminal, as a failed run has: the task stopped mid-effect is
  ``cancelled`` saying why, the one that never started ``cancelled`` "not started: …", both in
  the transaction that cancels the run; ``replay`` of it works.
- A compensation run that ends failed is reported as any run failing mid-drive (spec/cli.md
  §2): an error envelope on stderr naming it, exit 4, nothing on stdout.
- ``effects reconcile --status compensated`` without ``--compensation-effect`` is refused by
  naming the flag, and records nothing.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.test_recovery_ops import COMPENSATED, HEAD

STOPPABLE = (
    HEAD
    + """\
  actions:
    slow: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "sleep 30"], timeoutSeconds: 60 }
    quick: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo later >> marker.txt"] }
  tasks:
    - { id: slow, uses: "action:slow" }
    - { id: after, uses: "action:quick", needs: [slow] }
"""
)


def _inspect(cli, db: Path, run_id: str):  # type: ignore[no-untyped-def]
    got = cli("--output", "json", "inspect", run_id, "--db", str(db))
    assert got.rc == 0, got.stderr
    return got.data


def _running_run(cli, db: Path, proc: subprocess.Popen[str]) -> str:  # type: ignore[no-untyped-def]
    """The run's id once ``slow``'s effect has started (its process runs).

    Bounded in time (each poll is two CLI processes, slow on a loaded machine), and it stops
    at once, with the run's output, if the run process ended first."""
    deadline = time.monotonic() + 180  # a bound on waiting, not a speed assertion
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the run ended before its first effect started: {out}{err}")
        listed = cli("--output", "json", "runs", "list", "--db", str(db))
        if listed.rc == 0 and listed.data["runs"]:
            run_id: str = listed.data["runs"][0]["runId"]
            if [e["status"] for e in _inspect(cli, db, run_id)["effects"]] == ["started"]:
                return run_id
        time.sleep(0.1)
    raise AssertionError("the run's first effect never started")


def _stopped(how: str, cli, start_cli, wf: Path, db: Path) -> str:  # type: ignore[no-untyped-def]
    """Start ``wf``, stop it mid-effect ``how``; the cancelled run's id (exit 130 checked)."""
    # The deadline counts from the run's start: it must leave room for the start and the
    # dispatch of ``slow`` on a loaded machine (parallel test workers), and still fall inside
    # its 30 s sleep.
    extra = ["--timeout-seconds", "15"] if how == "timeout" else []
    proc: subprocess.Popen[str] = start_cli(
        "--output", "json", "run", str(wf), "--db", str(db), *extra
    )
    try:
        run_id = _running_run(cli, db, proc)
        if how == "sigint":
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert json.loads(out)["data"]["state"] == "cancelled"
    return run_id


# `agentctl cancel` lets the step in flight end (tests/cli/test_run_lifecycle.py): only what
# cuts a step is here.
@pytest.mark.parametrize("how", ["timeout", "sigint"])
def test_a_cancelled_run_ends_with_every_task_terminal(  # type: ignore[no-untyped-def]
    cli, start_cli, tmp_path: Path, how: str
) -> None:
    (tmp_path / "wf.yaml").write_text(STOPPABLE)
    db = tmp_path / "state" / "r.db"
    run_id = _stopped(how, cli, start_cli, tmp_path / "wf.yaml", db)
    data = _inspect(cli, db, run_id)
    assert data["run"]["state"] == "cancelled"
    tasks = {t["taskId"]: (t["state"], t["error"]) for t in data["tasks"]}
    assert tasks == {
        "slow": ("cancelled", "the run was cancelled"),  # stopped while its effect ran
        "after": ("cancelled", "not started: the run was cancelled"),
    }
    # Written with the run's own end: one transaction, one timestamp, the drive's trace.
    [end] = [a for a in data["audit"] if a["eventType"] == "run.cancelled"]
    ends = {(a["taskId"], a["traceId"], a["createdAt"]) for a in data["audit"][-3:]}
    assert ends == {(t, end["traceId"], end["createdAt"]) for t in ("slow", "after", None)}
    assert not (tmp_path / "marker.txt").exists()
    replayed = cli("--output", "json", "replay", run_id, "--db", str(db))
    assert replayed.rc == 130, replayed.stderr
    again = _inspect(cli, db, replayed.data["runId"])
    assert {t["taskId"]: (t["state"], t["error"]) for t in again["tasks"]} == tasks


def _compensation_fails(cli, tmp_path: Path) -> tuple[Path, str]:  # type: ignore[no-untyped-def]
    """A failed run whose second inverse (``undo1``, no ``allow.flag``) fails: (db, run id)."""
    (tmp_path / "wf.yaml").write_text(COMPENSATED)
    db = tmp_path / "state" / "r.db"
    source = cli("--output", "json", "run", "wf.yaml", "--db", str(db))
    assert source.rc == 4, source.stderr
    return db, str(source.error["error"]["runId"])


def test_a_failed_compensation_prints_an_error_envelope(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db, source = _compensation_fails(cli, tmp_path)
    done = cli("--output", "json", "compensate", source, "--db", str(db))
    assert done.rc == 4 and done.stdout == "", done.stdout
    error = done.error["error"]
    assert error["exitCode"] == 4 and "m1--compensate" in error["message"], error
    # undo2 ran before undo1 failed: the details say what was compensated all the same.
    assert error["details"] == {"sourceRunId": source, "compensatedTasks": ["m2"]}
    run = _inspect(cli, db, error["runId"])["run"]
    assert run["mode"] == "compensation" and run["state"] == "failed"
    assert run["sourceRunId"] == source and error["traceId"] == run["traceId"]
    human = cli("compensate", source, "--db", str(db))  # undo1 again, failing again
    assert human.rc == 4 and human.stdout == "", human.stdout
    lines = human.stderr.splitlines()
    assert lines[0].startswith("error: run failed: m1--compensate"), human.stderr
    assert lines[1].startswith("  run: run-") and lines[2].startswith("  trace: ")


def test_compensated_without_its_effect_is_refused_naming_the_flag(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path
) -> None:
    db, source = _compensation_fails(cli, tmp_path)
    effects = cli("--output", "json", "effects", "list", source, "--db", str(db)).data
    [m1] = [e["effectId"] for e in effects["effects"] if e["taskId"] == "m1"]
    audit_before = _inspect(cli, db, source)["audit"]
    other = m1  # any effect id: the flags are judged before it is
    cases = [
        (["--status", "compensated"], "--compensation-effect"),
        (["--status", "compensated", "--approved"], "--compensation-effect"),
        # Each status's flags: the one it needs, and none it would ignore.
        (["--status", "applied"], "--result-file"),
        (["--status", "not-applied", "--compensation-effect", other], "--status compensated"),
    ]
    for flags, named in cases:
        args = ("effects", "reconcile", m1[:12], *flags, "--reason", "undone by hand")
        refused = cli("--output", "json", *args, "--db", str(db))
        assert refused.rc == 4, refused.stderr
        assert named in refused.error["error"]["message"], refused.stderr
        assert "nothing was recorded" in refused.error["error"]["message"]
    after = cli("--output", "json", "effects", "list", source, "--db", str(db)).data
    assert after["reconciliations"] == []
    assert _inspect(cli, db, source)["audit"] == audit_before
