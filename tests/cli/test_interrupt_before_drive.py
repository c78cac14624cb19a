"""SIGTERM (or SIGINT) landing after ``run`` created its run and before the drive took the
signals: nothing of the run started, the run stays ``running`` with nothing driving it, and the
exit-130 error names it (``error.runId``) with what ends or continues it.

The window is a few statements wide (the live view starting, ``trio.run`` starting), so the
stand-in command sends the signal to itself at its first point: the call that starts the drive.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.clibackend import LedgerTarget
from tests.conftest import Cli

WF = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: never-driven }
spec:
  policy: { approval: never }
  actions:
    put: { kind: builtin.assign }
  tasks:
    - { id: a, uses: action:put, with: { x: 1 } }
"""

# ``python -m agentctl`` with the drive's start preceded by a SIGTERM from outside.
SIGNALLED_BEFORE_DRIVE = (
    "import signal, agentctl.coordinator.api as api\n"
    "real = api.run_trio\n"
    "def signalled(fn, *args):\n"
    "    signal.raise_signal(signal.SIGTERM)\n"
    "    return real(fn, *args)\n"
    "api.run_trio = signalled\n"
    "import agentctl.entry as e; e.main()"
)


def run_signalled(
    script: str, ledger_target: LedgerTarget, tmp_path: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    """``agentctl --output json run`` of ``WF`` on ``s/r.db``, through the stand-in
    ``script`` (``python -c``; ``extra``: its own arguments, before agentctl's)."""
    (tmp_path / "wf.yaml").write_text(WF, encoding="utf-8")
    how = ledger_target.invocation(
        ["--output", "json", "run", "wf.yaml", "--db", "s/r.db"], tmp_path
    )
    return subprocess.run(
        [sys.executable, "-c", script, *extra, *how.args],
        cwd=tmp_path,
        env=how.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_an_interrupt_before_the_drive_names_the_run_it_leaves_running(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    proc = run_signalled(SIGNALLED_BEFORE_DRIVE, ledger_target, tmp_path)
    assert proc.returncode == 130, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    error = json.loads(proc.stderr.strip().splitlines()[-1])["error"]
    runs = cli("runs", "list", "--db", "s/r.db", "--output", "json").data["runs"]
    assert [r["state"] for r in runs] == ["running"]  # created, never driven
    run_id = runs[0]["runId"]
    assert error["runId"] == run_id and error["traceId"] is not None
    assert error["exitCode"] == 130 and "interrupt" in error["message"]
    assert run_id in error["message"]
    assert f"`agentctl cancel {run_id} --db " in error["details"]["hint"]  # its ledger named
    # What the hint says: with the process gone, the run is cancelled at once.
    assert cli("cancel", run_id, "--db", "s/r.db").rc == 0
    shown = cli("inspect", run_id, "--db", "s/r.db", "--output", "json").data
    assert shown["run"]["state"] == "cancelled"
    assert [t["state"] for t in shown["tasks"]] == ["cancelled"]
