"""An approved effect whose input changed while it waited, as an operator meets it through the
CLI: the resumed run refuses to start it (the approval was given for another input), says so,
and names the recovery that works — a retry, which asks for a new approval of the new input.

The workflow is ``DRIFTED``: ``s`` prints memory ``k`` and is held for approval with k = a;
``again``, its sibling, makes k = b before anyone approves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.cli.test_reservation_settle import DRIFTED
from tests.conftest import Cli

DB = ("--db", "r.db")


def _json(cli: Cli, *args: str) -> Any:
    got = cli("--output", "json", *args, *DB)
    assert got.rc == 0, got.stderr
    return got.data


def _approve_only(cli: Cli, run_id: str) -> Any:
    """Approve the run's one pending approval; what it was asked for."""
    [pending] = _json(cli, "approvals", "list", run_id)["approvals"]
    _json(cli, "approvals", "approve", pending["approvalId"], "--reason", "ok")
    return pending


def test_an_approved_effect_whose_input_changed_names_the_retry_that_asks_again(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "wf.yaml").write_text(DRIFTED, encoding="utf-8")
    paused = cli("--output", "json", "run", "wf.yaml", *DB)
    assert paused.rc == 3, paused.stderr
    run_id = paused.data["runId"]
    asked = _approve_only(cli, run_id)
    assert asked["redactedInput"]["args"] == ["-c", "printf 'a'"]

    resumed = cli("resume", run_id, *DB)
    assert resumed.rc == 4, resumed.stderr
    message = " ".join(resumed.stderr.split())  # as printed, wrapped or not
    assert "was approved, but its input has changed since" in message
    assert "it never started" in message
    # The suggested retry names this invocation's database (the CLI adds --db to it).
    assert f"`agentctl retry FILE {run_id} --failed --db " in message
    assert "reconcile" not in message  # nothing ran: there is nothing to reconcile
    [task] = [t for t in _json(cli, "inspect", run_id)["tasks"] if t["taskId"] == "s"]
    assert task["state"] == "failed" and "never started" in task["error"]

    # The hint works: the retry asks again, for the input the effect now has, and runs it.
    retried = cli("--output", "json", "retry", "wf.yaml", run_id, "--failed", *DB)
    assert retried.rc == 3, retried.stderr  # paused for the new approval
    retry_id = retried.data["runId"]
    asked_again = _approve_only(cli, retry_id)
    assert asked_again["redactedInput"]["args"] == ["-c", "printf 'b'"]
    done = cli("--output", "json", "resume", retry_id, *DB)
    assert done.rc == 0, done.stderr
    assert done.data["output"]["s"]["stdout"] == "b"


SECRET_ENV = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: secret-drift }
spec:
  policy: { processAllowlist: [sh], environmentAllowlist: [DRIFT_TOKEN] }
  actions:
    show:
      kind: builtin.shell.exec
      command: /bin/sh
      args: ["-c", "echo ok"]
      env: { T: { env: DRIFT_TOKEN } }
      timeoutSeconds: 5
  tasks: [ { id: s, uses: "action:show" } ]
"""


def test_a_secret_that_changed_since_the_approval_is_named_as_a_cause(
    cli: Cli, tmp_path: Path
) -> None:
    # The approved effect's input holds the secret's digest: resumed where the variable has
    # another value, the effect is not the one approved, and the message must not blame a
    # sibling task (there is none) but name the secret as a possible cause.
    (tmp_path / "wf.yaml").write_text(SECRET_ENV, encoding="utf-8")
    paused = cli("--output", "json", "run", "wf.yaml", *DB, env={"DRIFT_TOKEN": "tok-first-77"})
    assert paused.rc == 3, paused.stderr
    run_id = paused.data["runId"]
    _approve_only(cli, run_id)
    resumed = cli("resume", run_id, *DB, env={"DRIFT_TOKEN": "tok-second-88"})
    assert resumed.rc == 4, resumed.stderr
    message = " ".join(resumed.stderr.split())
    assert "was approved, but its input has changed since" in message
    assert "a secret it uses now resolves to another value" in message
    assert "tok-second-88" not in resumed.stderr and "tok-first-77" not in resumed.stderr
