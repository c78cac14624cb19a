"""`agentctl cancel` from another shell: once it has returned, nothing more starts
(spec/cli.md §6: the flag is honoured at the next boundary). Every transaction that would
start work checks the flag first, serialized with the flag's own write, so a step whose
predecessor ends after the cancel never starts — not even when the coordinator's poll of the
flag comes late (here: the coordinator is stopped while the cancel lands)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.conftest import Cli, StartCli

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: boundary }
spec:
  policy: { approval: never, processAllowlist: [sh] }
  actions:
    step:
      kind: builtin.shell.exec
      command: /bin/sh
      args: ["-c", "echo $0 >> launched.txt; sleep 1; echo $0-done >> launched.txt", "step"]
      timeoutSeconds: 30
  tasks:
    - { id: a, uses: "action:step" }
    - { id: b, uses: "action:step", needs: [a] }
"""


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split() if path.exists() else []


def _wait_for(path: Path, line: str) -> None:
    deadline = time.monotonic() + 60
    while line not in _lines(path):
        assert time.monotonic() < deadline, f"{line!r} never appeared in {path}"
        time.sleep(0.02)


def test_no_step_starts_after_a_cancel_that_returned(
    cli: Cli, start_cli: StartCli, tmp_path: Path
) -> None:
    (tmp_path / "wf.yaml").write_text(WORKFLOW, encoding="utf-8")
    launched = tmp_path / "launched.txt"
    proc = start_cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    _wait_for(launched, "step")
    os.kill(proc.pid, signal.SIGSTOP)  # the coordinator cannot see the flag while stopped
    try:
        run_id = cli("--output", "json", "runs", "list", "--db", "r.db").data["runs"][0]["runId"]
        asked = cli("--output", "json", "cancel", run_id, "--db", "r.db")
        assert asked.rc == 0, asked.stderr
        _wait_for(launched, "step-done")  # a's work ended after the cancel returned
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert _lines(launched) == ["step", "step-done"]  # a ran once, b never started
    shown = cli("--output", "json", "inspect", run_id, "--db", "r.db").data
    assert shown["run"]["state"] == "cancelled"
    assert [e["taskId"] for e in shown["effects"]] == ["a"]
    assert {t["taskId"]: t["state"] for t in shown["tasks"]}["b"] == "cancelled"
