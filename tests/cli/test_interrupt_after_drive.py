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
from pathlib import Path

import pytest

from tests.cli.test_interrupt_before_drive import run_signalled
from tests.clibackend import LedgerTarget
from tests.conftest import Cli

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
    proc = run_signalled(SIGNALLED_AFTER_DRIVE, ledger_target, tmp_path, signame)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    outcome = json.loads(proc.stdout)
    assert outcome["kind"] == "RunOutcome" and outcome["data"]["state"] == "succeeded"
    runs = cli("runs", "list", "--db", "s/r.db", "--output", "json").data["runs"]
    assert [(r["runId"], r["state"]) for r in runs] == [(outcome["data"]["runId"], "succeeded")]
