"""A ``serve`` stopped by SIGTERM while an ``extension.process`` is in flight, black-box.

The extension (a real process, below) marks its handshake in ``handshakes.txt`` and its
invocation (the effect id) in ``invoked.txt``, each held while a file of the test's exists.
Stopped during the handshake, the operation never left the worker: the hand-back ends the
effect ``cancelled`` (its reservation given back, nothing for an operator to reconcile), as
`run` does, and leaves its task ``retry_scheduled`` in the ``running`` run, so the next
``serve`` runs it as a new attempt — sending the operation once. Stopped once the invocation
started, the extension had the request: the effect stays ``uncertain``, its task parked
``waiting_for_effect`` (docs/scale-out.md "Stopping a serve").
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.queue_helpers import ledger_query, serve_report, wait_for
from tests.clibackend import LedgerTarget
from tests.conftest import Cli, StartCli

DB = ("--db", "db.sqlite")
LEASE = ("--lease-seconds", "2", "--poll-seconds", "0.2")

# Each phase waits while its hold file exists (bounded, so nothing outlives a failed test).
SCRIPT = """\
import json, os, sys, time
P = "agentctl.dev/process-extension/v1"
def hold(name):
    end = time.monotonic() + 300
    while os.path.exists(name) and time.monotonic() < end:
        time.sleep(0.05)
if sys.argv[-1] == "--agentctl-handshake":
    open("handshakes.txt", "a").write("handshake\\n")
    hold("handshake.hold")
    shake = {"protocolVersion": P, "inputSchema": {"type": "object"},
             "outputSchema": {"type": "object"}, "capabilities": ["c"]}
    print(json.dumps(shake))
else:
    req = json.load(sys.stdin)
    open("invoked.txt", "a").write(req["effectId"] + "\\n")
    hold("invoke.hold")
    print(json.dumps({"protocolVersion": P, "effectId": req["effectId"], "output": {}}))
"""

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{ name: serve-unsent }}
spec:
  policy: {{ approval: never, processAllowlist: [{program}] }}
  runtime: {{ budgets: {{ maxProcessOutputBytes: 100000 }} }}
  actions:
    e:
      kind: extension.process
      command: {python}
      args: [ext.py]
      timeoutSeconds: 120
      combinedOutputLimitBytes: 1000
      protocolVersion: agentctl.dev/process-extension/v1
      inputSchema: {{ type: object }}
      outputSchema: {{ type: object }}
      capabilities: [c]
  tasks:
    - {{ id: t, uses: action:e, with: {{}} }}
"""
EXTENSION = f"extension '{os.path.basename(sys.executable)} ext.py'"


def _serve(start_cli: StartCli) -> subprocess.Popen[str]:
    return start_cli("--output", "json", "serve", *DB, "--exit-when-idle", *LEASE)


def _stop_serve_in(cli: Cli, start_cli: StartCli, root: Path, phase: str) -> str:
    """Submit the run, serve it, SIGTERM the serve once the extension is held in ``phase``
    (handshake | invoke); the run's id, once the serve exited (0: it handed the run back)."""
    (root / "ext.py").write_text(SCRIPT)
    program, python = os.path.basename(sys.executable), sys.executable
    (root / "wf.yaml").write_text(WORKFLOW.format(program=program, python=python))
    (root / f"{phase}.hold").touch()
    submitted = cli("--output", "json", "submit", "wf.yaml", *DB)
    assert submitted.rc == 0, submitted.stderr
    serving = _serve(start_cli)
    marker = root / ("handshakes.txt" if phase == "handshake" else "invoked.txt")
    wait_for(marker.exists, what=f"the extension's {phase}")
    serving.send_signal(signal.SIGTERM)
    report = serve_report(serving)
    assert report["stoppedBy"] == "SIGTERM"
    assert [r["state"] for r in report["runs"]] == ["released"]
    run_id: str = submitted.data["runId"]
    return run_id


def _inspect(cli: Cli, run_id: str) -> Any:
    got = cli("--output", "json", "inspect", run_id, *DB)
    assert got.rc == 0, got.stderr
    return got.data


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def _continue(cli: Cli, start_cli: StartCli, run_id: str, how: str) -> Any:
    """Go on with the handed-back run as ``how`` says; the run as ``inspect`` shows it then."""
    if how == "serve":
        assert [r["state"] for r in serve_report(_serve(start_cli))["runs"]] == ["succeeded"]
    elif how == "resume":
        resumed = cli("--output", "json", "resume", run_id, *DB)
        assert resumed.rc == 0, resumed.stderr
    else:  # cancelled first: what `run` cut the same way leaves, then retried
        assert cli("cancel", run_id, *DB).rc == 0
        seen = _inspect(cli, run_id)
        assert seen["run"]["state"] == "cancelled"
        assert [(t["state"], t["error"]) for t in seen["tasks"]] == [
            ("cancelled", "the run was cancelled")
        ]
        assert seen["budget"]["reserved"] == {"processOutputBytes": 0}
        retried = cli("--output", "json", "retry", "wf.yaml", run_id, "--failed", *DB)
        assert retried.rc == 0, retried.stderr
        run_id = retried.data["runId"]
    return _inspect(cli, run_id)


@pytest.mark.parametrize("how", ["serve", "resume", "cancel-retry"])
def test_a_serve_stopped_during_the_handshake_cancels_the_effect_it_never_sent(
    cli: Cli, start_cli: StartCli, ledger_target: LedgerTarget, tmp_path: Path, how: str
) -> None:
    # It used to be left uncertain, its task parked: an operator had to reconcile an effect
    # the extension provably never received before any serve would continue the run.
    run_id = _stop_serve_in(cli, start_cli, tmp_path, "handshake")
    query = ledger_query(ledger_target, tmp_path / "db.sqlite")
    assert query("SELECT state, owner_pid FROM runs", ()) == [("running", None)]  # handed back
    seen = _inspect(cli, run_id)
    [cut] = seen["effects"]
    assert (cut["status"], cut["attempt"]) == ("cancelled", 1)
    assert cut["error"] == f"{EXTENSION}: effect cancelled before its request was sent"
    [task] = seen["tasks"]
    assert (task["state"], task["attempt"]) == ("retry_scheduled", 1)  # for its next attempt
    assert task["error"] == f"task t: {cut['error']}"
    assert seen["budget"]["reserved"] == {"processOutputBytes": 0}  # given back, none spent
    assert _lines(tmp_path / "invoked.txt") == []  # the extension never received it
    listed = cli("--output", "json", "effects", "list", run_id, *DB)
    assert [e["status"] for e in listed.data["effects"]] == ["cancelled"], listed.stderr

    # Whatever continues it runs the task as a new attempt, with no operator step: sent once.
    (tmp_path / "handshake.hold").unlink()
    done = _continue(cli, start_cli, run_id, how)
    assert done["run"]["state"] == "succeeded", done["run"]
    assert done["effects"][-1]["status"] == "succeeded"
    assert done["effectReconciliations"] == []
    assert _lines(tmp_path / "invoked.txt") == [done["effects"][-1]["effectId"]]
    assert _lines(tmp_path / "handshakes.txt") == ["handshake", "handshake"]
    assert done["budget"]["reserved"] == {"processOutputBytes": 0}
    if how != "cancel-retry":  # the same run: the cut attempt, then the one that ran
        statuses = [(e["attempt"], e["status"]) for e in done["effects"]]
        assert statuses == [(1, "cancelled"), (2, "succeeded")]


def test_a_serve_stopped_once_the_invocation_started_leaves_the_effect_uncertain(
    cli: Cli, start_cli: StartCli, tmp_path: Path
) -> None:
    run_id = _stop_serve_in(cli, start_cli, tmp_path, "invoke")
    (tmp_path / "invoke.hold").unlink()
    seen = _inspect(cli, run_id)
    assert seen["run"]["state"] == "running"
    [effect] = seen["effects"]
    assert effect["status"] == "uncertain"  # the extension had the request: it may have acted
    assert [t["state"] for t in seen["tasks"]] == ["waiting_for_effect"]
    assert seen["budget"]["reserved"] == {"processOutputBytes": 2000}  # until reconciled
    assert _lines(tmp_path / "invoked.txt") == [effect["effectId"]]
    # Nothing runs it again on its own: the next serve finds the run blocked on it.
    assert serve_report(_serve(start_cli))["runs"] == []  # not claimed while it is unresolved
    assert _lines(tmp_path / "invoked.txt") == [effect["effectId"]]
    [still] = _inspect(cli, run_id)["effects"]
    assert still["status"] == "uncertain"
