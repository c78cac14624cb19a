"""SIGTERM (or SIGINT) landing after the drive has settled the run, before ``trio.run`` has
returned: the run's outcome was decided and is durable, so the command reports it (exit 0 for
a succeeded run), as it does for an interrupt after that point. trio raised such a pending
interrupt in place of its finished main task's result: the run was ``succeeded`` in the ledger
while the command exited 130, "interrupted".

The window is a few statements wide, so the stand-in command sends the signal to itself at
its start: as the drive's signal receiver closes, the run settled.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.clibackend import LedgerTarget
from tests.conftest import Cli

WF = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: decided }
spec:
  policy: { approval: never }
  actions:
    put: { kind: builtin.assign }
  tasks:
    - { id: a, uses: action:put, with: { x: 1 } }
"""

# ``python -m agentctl`` with a signal sent to itself as the drive's signal receiver closes.
SIGNALLED_AFTER_DRIVE = (
    "import contextlib, signal, sys, trio\n"
    "sent = getattr(signal, sys.argv.pop(1))\n"
    "real = trio.open_signal_receiver\n"
    "@contextlib.contextmanager\n"
    "def receiver_then_signal(*signals):\n"
    "    with real(*signals) as receiver:\n"
    "        yield receiver\n"
    "    signal.raise_signal(sent)\n"
    "trio.open_signal_receiver = receiver_then_signal\n"
    "import agentctl.entry as e; e.main()"
)


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_an_interrupt_after_the_drive_keeps_the_decided_outcome(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path, signame: str
) -> None:
    (tmp_path / "wf.yaml").write_text(WF, encoding="utf-8")
    how = ledger_target.invocation(
        ["--output", "json", "run", "wf.yaml", "--db", "s/r.db"], tmp_path
    )
    proc = subprocess.run(
        [sys.executable, "-c", SIGNALLED_AFTER_DRIVE, signame, *how.args],
        cwd=tmp_path,
        env=how.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    outcome = json.loads(proc.stdout)
    assert outcome["kind"] == "RunOutcome" and outcome["data"]["state"] == "succeeded"
    runs = cli("runs", "list", "--db", "s/r.db", "--output", "json").data["runs"]
    assert [(r["runId"], r["state"]) for r in runs] == [(outcome["data"]["runId"], "succeeded")]
