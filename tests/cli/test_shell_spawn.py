"""A shell effect's child in a real run: it inherits no descriptor of its worker (the
worker's socket to the coordinator above all) but its three standard streams, and a command
that cannot start fails the run with the system's reason.

A process that exits non-zero fails its task but keeps what it did — exit code, redacted
stdout and stderr, ``status: failed`` — on its effect's result and its task's output, through
replay and through a resume that finds its outcome recorded; one stopped by a limit (output
overflow, timeout) keeps none of its bytes."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

HEAD = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: spawned }
spec:
  policy: { approval: never, processAllowlist: [ls, prog] }
"""

LIST_FDS = """\
  actions: { fds: { kind: builtin.shell.exec, command: /bin/ls, args: [/proc/self/fd] } }
  tasks: [ { id: fds, uses: "action:fds" } ]
"""


def test_the_child_inherits_only_its_standard_streams(  # type: ignore[no-untyped-def]
    cli, write_workflow: Callable[[str], Path], tmp_path: Path
) -> None:
    wf = write_workflow(HEAD + LIST_FDS)
    done = cli("--output", "json", "run", str(wf), "--db", str(tmp_path / "r.db"))
    assert done.rc == 0, done.stderr
    fds = sorted(int(name) for name in done.data["output"]["fds"]["stdout"].split())
    assert fds == [0, 1, 2, 3]  # 3: ls's own handle on the listed directory


@pytest.mark.parametrize("case", ["missing", "not_executable", "directory"])
def test_a_command_that_cannot_start_fails_the_run(  # type: ignore[no-untyped-def]
    cli, write_workflow: Callable[[str], Path], tmp_path: Path, case: str
) -> None:
    prog = tmp_path / "bin" / "prog"
    prog.parent.mkdir()
    if case == "not_executable":
        prog.write_text("#!/bin/sh\n")
    elif case == "directory":
        prog.mkdir()
    action = f'{{ kind: builtin.shell.exec, command: "{prog}" }}'
    wf = write_workflow(
        HEAD + f'  actions: {{ p: {action} }}\n  tasks: [ {{ id: p, uses: "action:p" }} ]\n'
    )
    done = cli("--output", "json", "run", str(wf), "--db", str(tmp_path / "r.db"))
    assert done.rc == 4, done.stderr
    reason = os.strerror(2 if case == "missing" else 13)
    assert f"cannot start process 'prog': {reason}" in done.error["error"]["message"]


# ---------------------------------------------------------------- a process that exits non-zero

FAILING = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: failing }
spec:
  policy: { approval: never, processAllowlist: [sh], environmentAllowlist: [DEPLOY_TOKEN] }
  actions:
    boom:
      kind: builtin.shell.exec
      command: /bin/sh
      args: ["-c", "echo out=$TOKEN; echo err=$TOKEN >&2; exit 3"]
      env: { TOKEN: { env: DEPLOY_TOKEN } }
    fine: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo fine"] }
  tasks:
    - { id: boom, uses: "action:boom", failure: continue, retry: { maxAttempts: 3 } }
    - { id: after, uses: "action:fine", needs: [boom] }
    - { id: other, uses: "action:fine" }
"""
# What the operator reads for the failed step: the success shape, status failed, redacted.
FAILED_OUTPUT = {
    "status": "failed",
    "changed": True,
    "exitCode": 3,
    "stdout": "out=[REDACTED]\n",
    "stderr": "err=[REDACTED]\n",
}
FAILED_ERROR = "process exited with code 3; stderr ends: err=[REDACTED]"


def _secret() -> str:
    return "s3cr3t" + os.urandom(8).hex()


def _inspected(cli, db: Path, run_id: str, env: dict[str, str]) -> dict:  # type: ignore[no-untyped-def,type-arg]
    shown = cli("--output", "json", "inspect", run_id, "--db", str(db), env=env)
    assert shown.rc == 0, shown.stderr
    return {
        "text": shown.stdout + shown.stderr,
        "tasks": {t["taskId"]: t for t in shown.data["tasks"]},
        "effects": [e for e in shown.data["effects"] if e["taskId"] == "boom"],
        "budget": shown.data["budget"],
    }


def test_a_failed_process_keeps_its_exit_code_and_output(  # type: ignore[no-untyped-def]
    cli, ledger_target, write_workflow: Callable[[str], Path], tmp_path: Path
) -> None:
    secret = _secret()
    env = {"DEPLOY_TOKEN": secret}
    wf = write_workflow(FAILING)
    db = tmp_path / "state" / "r.db"
    done = cli("--output", "json", "run", str(wf), "--db", str(db), env=env)
    assert done.rc == 4, done.stderr
    assert done.error["error"]["message"] == f"run failed: boom: {FAILED_ERROR}"
    run_id = done.error["error"]["runId"]
    shown = _inspected(cli, db, run_id, env)
    boom = shown["tasks"]["boom"]
    assert (boom["state"], boom["attempt"], boom["error"]) == ("failed", 1, FAILED_ERROR)
    assert boom["output"] == FAILED_OUTPUT
    (effect,) = shown["effects"]  # a non-zero exit is definitive: never retried
    assert (effect["status"], effect["confirmed"]) == ("failed", False)
    assert effect["result"] == FAILED_OUTPUT and effect["error"] == FAILED_ERROR
    assert shown["tasks"]["after"]["state"] == "skipped"  # failure: continue, as before
    assert shown["tasks"]["other"]["state"] == "succeeded"
    # Its output counts as a success's would (out=…, err=… with the secret, then "fine\n").
    used = 2 * len(f"out={secret}\n") + len("fine\n")
    assert shown["budget"]["usage"]["processOutputBytes"] == used
    assert secret not in shown["text"] + done.stdout + done.stderr
    assert secret not in ledger_target.contents(db)


def test_a_replay_shows_the_recorded_failed_output(  # type: ignore[no-untyped-def]
    cli, write_workflow: Callable[[str], Path], tmp_path: Path
) -> None:
    env = {"DEPLOY_TOKEN": _secret()}
    wf = write_workflow(FAILING)
    db = tmp_path / "r.db"
    run_id = cli("--output", "json", "run", str(wf), "--db", str(db), env=env).error["error"]
    replayed = cli("--output", "json", "replay", run_id["runId"], "--db", str(db))
    assert replayed.rc == 4 and replayed.data["state"] == "failed", replayed.stderr
    shown = _inspected(cli, db, replayed.data["runId"], {})
    boom = shown["tasks"]["boom"]
    assert (boom["state"], boom["disposition"]) == ("failed", "recorded")
    assert (boom["output"], boom["error"]) == (FAILED_OUTPUT, FAILED_ERROR)
    assert shown["effects"] == []  # replay runs nothing


def test_a_failed_outcome_found_on_resume_keeps_its_output(  # type: ignore[no-untyped-def]
    cli, write_workflow: Callable[[str], Path], tmp_path: Path
) -> None:
    """Killed once both failed outcomes are durable but before either task completes: resume
    completes the tasks from the recorded results, outputs included, running nothing again."""
    twice = FAILING.replace("  tasks:\n", "  runtime: { maxConcurrency: 2 }\n  tasks:\n")
    twice = twice.replace('uses: "action:fine", needs: [boom]', 'uses: "action:boom"')
    wf = write_workflow(twice.replace(", retry: { maxAttempts: 3 }", ""))
    db = tmp_path / "r.db"
    env = {"DEPLOY_TOKEN": _secret()}
    kill = {"AGENTCTL_CRASH_AT": "coordinator.after_outcome", "AGENTCTL_CRASH_HIT": "2"}
    first = cli("--output", "json", "run", str(wf), "--db", str(db), env={**env, **kill})
    assert first.rc == -9, first.stderr
    run_id = cli("--output", "json", "runs", "list", "--db", str(db)).data["runs"][0]["runId"]
    before = _inspected(cli, db, run_id, env)
    assert before["tasks"]["boom"]["state"] == "running"  # its outcome alone is durable
    assert before["effects"][0]["result"] == FAILED_OUTPUT
    resumed = cli("--output", "json", "resume", run_id, "--db", str(db), env=env)
    assert resumed.rc == 4, resumed.stderr
    shown = _inspected(cli, db, run_id, env)
    for task_id in ("boom", "after"):
        task = shown["tasks"][task_id]
        assert (task["state"], task["output"], task["error"]) == (
            "failed",
            FAILED_OUTPUT,
            FAILED_ERROR,
        )
    assert len(shown["effects"]) == 1  # boom's one effect, not run again


STOPPED = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: stopped }
spec:
  policy: { approval: never, processAllowlist: [sh], environmentAllowlist: [DEPLOY_TOKEN] }
  actions:
    boom:
      kind: builtin.shell.exec
      command: /bin/sh
      args: ["-c", "SCRIPT"]
      env: { TOKEN: { env: DEPLOY_TOKEN } }
      stdoutLimitBytes: 64
      timeoutSeconds: 1
  tasks: [ { id: boom, uses: "action:boom" } ]
"""
LIMITED = {
    # Over its stdout limit: a failed effect with none of its bytes, the secret's included.
    "overflow": ("while :; do echo $TOKEN; done", 4, "failed"),
    # Past its timeout, having printed: uncertain (it may have had its effect), no output.
    "timeout": ("echo $TOKEN; echo $TOKEN >&2; sleep 30", 4, "uncertain"),
}


@pytest.mark.parametrize("case", sorted(LIMITED))
def test_a_process_stopped_by_a_limit_records_no_output(  # type: ignore[no-untyped-def]
    cli, ledger_target, write_workflow: Callable[[str], Path], tmp_path: Path, case: str
) -> None:
    script, rc, status = LIMITED[case]
    secret = _secret()
    env = {"DEPLOY_TOKEN": secret}
    wf = write_workflow(STOPPED.replace("SCRIPT", script))
    db = tmp_path / "r.db"
    done = cli("--output", "json", "run", str(wf), "--db", str(db), env=env)
    assert done.rc == rc, done.stderr
    shown = _inspected(cli, db, done.error["error"]["runId"], env)
    (effect,) = shown["effects"]
    assert (effect["status"], effect["result"]) == (status, None)
    assert shown["tasks"]["boom"]["output"] is None
    assert secret not in shown["text"] + done.stderr
    assert secret not in ledger_target.contents(db)
