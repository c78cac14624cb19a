"""``retry --failed`` of a run that ended while its ``a2a.delegate`` task ran, once the effect is
settled as applied — by ``effects continue-remote`` or ``effects reconcile --status applied``:
the delegation is reused with the recorded result and only the tasks after it execute; the
peer still received the message once (the original's A2A page)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
from pathlib import Path

import pytest

from tests.a2a_peer_process import Peer, running_peer
from tests.cli.test_a2a_delegate import _db, _wait_for_handle
from tests.cli.test_a2a_delegate import _workflow as a2a_workflow
from tests.conftest import Cli, StartCli

# The delegation of test_a2a_delegate's workflow, and a task after it that reads its text.
THEN = """    - id: after
      uses: action:keep
      needs: [ask]
      with: { value: "${{ tasks.ask.output.text }}" }
  outputs:
    review: "${{ tasks.after.output.output.value }}"
"""


def _workflow(peer: Peer, tmp_path: Path) -> Path:
    wf = a2a_workflow(peer, tmp_path)
    text = wf.read_text(encoding="utf-8").split("  outputs:\n")[0] + THEN
    actions = "review: { kind: a2a.delegate }\n"
    wf.write_text(text.replace(actions, actions + "    keep: { kind: builtin.assign }\n"))
    return wf


def _cancelled_mid_task(cli: Cli, start_cli: StartCli, wf: Path, db: str) -> dict[str, str]:
    """Run ``wf``, SIGTERM its coordinator once the remote task id is durable: the run ends
    cancelled, its effect uncertain with the task id. Returns the effect."""
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    proc = start_cli("--output", "json", "run", str(wf), "--db", db, **quiet)
    try:
        effect = _wait_for_handle(cli, db)
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait()
    assert proc.returncode == 130
    return effect


def _settle(cli: Cli, how: str, effect: dict[str, str], peer: Peer, db: str, tmp: Path) -> str:
    """Record the effect applied ``how``; the text its recorded result carries."""
    if how == "continue-remote":
        peer.let_tasks_finish()
        done = cli(
            "--output", "json", "effects", "continue-remote", effect["effectId"],
            "--reason", "resume persisted task", "--approved", "--db", db,
        )  # fmt: skip
        assert done.rc == 0, done.stderr
        return "reviewed: check the release notes"
    result = tmp / "result.json"
    result.write_text(json.dumps({"state": "completed", "text": "reviewed by hand"}))
    done = cli(
        "--output", "json", "effects", "reconcile", effect["effectId"], "--status", "applied",
        "--reason", "the peer's log shows it", "--result-file", str(result), "--db", db,
    )  # fmt: skip
    assert done.rc == 0, done.stderr
    return "reviewed by hand"


@pytest.mark.parametrize("how", ["continue-remote", "reconcile"])
def test_retry_reuses_a_delegation_settled_applied_after_its_run_ended(
    cli: Cli, start_cli: StartCli, tmp_path: Path, how: str
) -> None:
    with running_peer(tmp_path, delay=0.0, hold=True) as peer:
        wf, db = _workflow(peer, tmp_path), _db(tmp_path)
        effect = _cancelled_mid_task(cli, start_cli, wf, db)
        run_id = effect["runId"]
        retry = ("--output", "json", "retry", str(wf), run_id, "--failed", "--db", db)
        unsettled = cli(*retry, "--plan")  # uncertain: nobody knows yet whether it ran
        assert unsettled.rc == 3 and "unreconciled_effect" in unsettled.stdout
        text = _settle(cli, how, effect, peer, db, tmp_path)
        plan = cli(*retry, "--plan")
        assert plan.rc == 0, plan.stdout
        assert (plan.data["reusedTasks"], plan.data["rerunTasks"]) == (["ask"], ["after"])
        done = cli(*retry)
        assert done.rc == 0, done.stderr
        assert done.data["output"] == {"review": text}
        assert peer.lines(peer.received) == [{"messageId": "msg-1"}]  # never sent again
    seen = cli("--output", "json", "inspect", done.data["runId"], "--db", db).data
    assert [(t["taskId"], t["disposition"]) for t in seen["tasks"]] == [
        ("ask", "reused"),
        ("after", "executed"),
    ]
    assert all(e["taskId"] != "ask" for e in seen["effects"])  # the delegation was not redone


@pytest.mark.sqlite_only(reason="printed commands quote the --db path")
def test_effect_views_name_the_remote_task_and_continue_remote(
    cli: Cli, start_cli: StartCli, tmp_path: Path
) -> None:
    """`effects list` and `effects inspect` show an uncertain delegation's remote task and
    print, as `inspect` does, the `continue-remote` that observes it again; it runs as printed."""
    with running_peer(tmp_path, delay=0.0, hold=True) as peer:
        wf, db = _workflow(peer, tmp_path), _db(tmp_path)
        effect = _cancelled_mid_task(cli, start_cli, wf, db)
        views = [("effects", "list", effect["runId"]), ("effects", "inspect", effect["effectId"])]
        printed: list[list[str]] = []
        for view in views:
            shown = cli(*view, "--db", db)
            assert shown.rc == 0, shown.stderr
            assert f"remote task {effect['remoteTaskId']}" in shown.stdout, shown.stdout
            joined = shown.stdout.replace(" \\\n", " ")
            printed = [
                shlex.split(line.split("$ ", 1)[1])
                for line in joined.splitlines()
                if "$ " in line and "continue-remote" in line
            ]
            assert printed == [
                ["agentctl", "effects", "continue-remote", effect["effectId"], "--db", db]
            ], shown.stdout
        peer.let_tasks_finish()
        done = cli(*printed[0][1:])
        assert done.rc == 0, done.stderr
        assert peer.lines(peer.received) == [{"messageId": "msg-1"}]  # observed, not resent
