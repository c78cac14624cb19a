"""SIGINT/SIGTERM around ``compensation.onFailure: automatic``: the user's stop never starts a
compensation, and never takes the failed run's outcome away.

A signal landing once the failed run's drive has settled it used to be set aside with the
decided outcome, and the command then ran the whole compensation run anyway; one landing
outside the compensation's own drive ended the command with a bare "interrupted" (exit 130,
no run id), though the run had failed durably. Now the failed run stays the command's
outcome (exit 4, its run and trace named), its error saying what became of the compensation.

The windows are a few statements wide, so stand-in commands send the signal to themselves:
as the failed run's drive hands its signal receiver back, or as the compensation's drive has
ended.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.clibackend import LedgerTarget
from tests.conftest import Cli

WF = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: autocomp }
spec:
  compensation: { onFailure: automatic }
  policy: { approval: never, writableRoots: [out] }
  actions: { save: { kind: builtin.write }, check: { kind: builtin.assert } }
  tasks:
    - { id: make, uses: "action:save", with: { path: out/r.txt, content: made },
        compensate: { uses: "action:save", with: { path: out/r.txt, content: undone } } }
    - { id: verify, uses: "action:check", needs: [make], with: { that: false, message: boom } }
"""

# The signal as the first drive (the failed run's) hands its signal receiver back.
AFTER_FAILED_DRIVE = (
    "import contextlib, signal, sys, trio\n"
    "sent = getattr(signal, sys.argv.pop(1))\n"
    "real, closed = trio.open_signal_receiver, []\n"
    "@contextlib.contextmanager\n"
    "def receiver_then_signal(*signals):\n"
    "    with real(*signals) as receiver:\n"
    "        yield receiver\n"
    "    closed.append(1)\n"
    "    if len(closed) == 1:\n"
    "        signal.raise_signal(sent)\n"
    "trio.open_signal_receiver = receiver_then_signal\n"
    "import agentctl.entry as e; e.main()"
)

# The signal once the compensation run's drive has ended, before its outcome is read back.
AFTER_COMPENSATION_DRIVE = (
    "import signal, sys\n"
    "sent = getattr(signal, sys.argv.pop(1))\n"
    "import agentctl.coordinator.remedy as remedy\n"
    "real = remedy._compensated_tasks\n"
    "def signalled(*args):\n"
    "    signal.raise_signal(sent)\n"
    "    return real(*args)\n"
    "remedy._compensated_tasks = signalled\n"
    "import agentctl.entry as e; e.main()"
)


def _run(script: str, ledger_target: LedgerTarget, tmp_path: Path, signame: str) -> dict:
    (tmp_path / "wf.yaml").write_text(WF, encoding="utf-8")
    how = ledger_target.invocation(
        ["--output", "json", "run", "wf.yaml", "--db", "s/r.db"], tmp_path
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, signame, *how.args],
        cwd=tmp_path,
        env=how.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 4, (proc.stdout, proc.stderr)
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    return json.loads(proc.stderr.strip().splitlines()[-1])["error"]


def _runs(cli: Cli) -> list[tuple[str, str, str]]:
    runs = cli("runs", "list", "--db", "s/r.db", "--output", "json").data["runs"]
    return [(r["runId"], r["mode"], r["state"]) for r in runs]


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_an_interrupt_after_the_failed_drive_starts_no_compensation(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path, signame: str
) -> None:
    error = _run(AFTER_FAILED_DRIVE, ledger_target, tmp_path, signame)
    [(run_id, mode, state)] = _runs(cli)  # no compensation run was created
    assert (mode, state) == ("execute", "failed")
    assert error["runId"] == run_id and error["traceId"] is not None
    assert "automatic compensation not started: interrupted" in error["message"]
    assert f"`agentctl compensate {run_id} --db " in error["message"]
    assert (tmp_path / "out" / "r.txt").read_text(encoding="utf-8") == "made"
    # What the error says to do still works: the compensation runs when asked.
    assert cli("compensate", run_id, "--db", "s/r.db").rc == 0
    assert (tmp_path / "out" / "r.txt").read_text(encoding="utf-8") == "undone"


def test_an_interrupt_after_the_compensation_drive_keeps_the_failed_outcome(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    error = _run(AFTER_COMPENSATION_DRIVE, ledger_target, tmp_path, "SIGTERM")
    runs = _runs(cli)  # newest first
    assert [(mode, state) for _, mode, state in runs] == [
        ("compensation", "succeeded"),
        ("execute", "failed"),
    ]
    compensation_id, run_id = runs[0][0], runs[1][0]
    assert error["runId"] == run_id and error["traceId"] is not None
    assert "automatic compensation interrupted (SIGINT or SIGTERM)" in error["message"]
    assert f"`agentctl inspect {compensation_id} --db " in error["message"]
