"""``extension.process`` stopped mid-effect, through the CLI, with a real extension process.

The extension (``tests.sleepy_extension``) marks its handshake in ``handshakes.txt`` and its
invocation in ``invoked.txt``, then sleeps as its arguments say. A run cut short while the
handshake is under way (SIGINT, ``--timeout-seconds``: the coordinator sends its worker a
``Cancel``) never sent the operation to the extension: its effect ends ``cancelled``, its
reservation given back, with nothing for an operator to reconcile. Cut once the invocation
started, the extension had the request and may have acted: the effect stays ``uncertain``.
``agentctl cancel`` from another shell cuts nothing in flight: the handshake and the
invocation run to their end (docs/operations.md §6).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli, StartCli
from tests.sleepy_extension import HANDSHAKE_MARKER, MARKER, SCRIPT

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{ name: ext-cancel }}
spec:
  policy: {{ approval: never, processAllowlist: [{program}] }}
  runtime: {{ budgets: {{ maxProcessOutputBytes: 100000 }} }}
  actions:
    e:
      kind: extension.process
      command: {python}
      args: [ext.py, "{handshake}", "{invoke}"]
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


def _start(start_cli: StartCli, tmp_path: Path, handshake: float, invoke: float, *extra: str):  # type: ignore[no-untyped-def]
    (tmp_path / "ext.py").write_text(SCRIPT)
    program, python = os.path.basename(sys.executable), sys.executable
    text = WORKFLOW.format(program=program, python=python, handshake=handshake, invoke=invoke)
    (tmp_path / "wf.yaml").write_text(text)
    return start_cli("--output", "json", "run", "wf.yaml", *extra)


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    """Until the extension wrote ``path`` (bounded: a bound on waiting, not a speed assert)."""
    deadline = time.monotonic() + 120
    while not path.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the run ended before {path.name} was written: {out}{err}")
        assert time.monotonic() < deadline, f"{path.name} was never written"
        time.sleep(0.05)


def _ended(proc: subprocess.Popen[str]) -> tuple[int, Any]:
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "Traceback" not in err, err
    return proc.returncode, json.loads(out)["data"]


def _inspect(cli: Cli, run_id: str) -> Any:
    got = cli("--output", "json", "inspect", run_id)
    assert got.rc == 0, got.stderr
    return got.data


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


@pytest.mark.parametrize("how", ["sigint", "timeout"])
def test_a_stop_during_the_handshake_cancels_the_effect_it_never_sent(
    cli: Cli, start_cli: StartCli, tmp_path: Path, how: str
) -> None:
    # It used to be left uncertain: a cancelled run whose effect an operator had to
    # reconcile, although the extension never received the operation.
    extra = ("--timeout-seconds", "10") if how == "timeout" else ()
    proc = _start(start_cli, tmp_path, 600, 0, *extra)
    _wait_for(tmp_path / HANDSHAKE_MARKER, proc)
    if how == "sigint":
        proc.send_signal(signal.SIGINT)
    rc, outcome = _ended(proc)
    assert (rc, outcome["state"]) == (130, "cancelled")
    data = _inspect(cli, outcome["runId"])
    [effect] = data["effects"]
    assert effect["status"] == "cancelled"
    assert effect["error"] == f"{EXTENSION}: effect cancelled before its request was sent"
    assert [t["state"] for t in data["tasks"]] == ["cancelled"]
    assert data["budget"]["reserved"] == {"processOutputBytes": 0}  # given back, none spent
    assert _lines(tmp_path / HANDSHAKE_MARKER) == ["handshake"]
    assert _lines(tmp_path / MARKER) == []  # the extension never received the operation


def test_a_stop_once_the_invocation_started_leaves_the_effect_uncertain(
    cli: Cli, start_cli: StartCli, tmp_path: Path
) -> None:
    proc = _start(start_cli, tmp_path, 0, 600)
    _wait_for(tmp_path / MARKER, proc)
    proc.send_signal(signal.SIGINT)
    rc, outcome = _ended(proc)
    assert (rc, outcome["state"]) == (130, "cancelled")
    data = _inspect(cli, outcome["runId"])
    [effect] = data["effects"]
    assert effect["status"] == "uncertain"  # the extension had the request: it may have acted
    assert data["budget"]["reserved"] == {"processOutputBytes": 2000}  # until reconciled
    assert _lines(tmp_path / MARKER) == [effect["effectId"]]


def test_agentctl_cancel_during_the_handshake_lets_the_effect_run_to_its_end(
    cli: Cli, start_cli: StartCli, tmp_path: Path
) -> None:
    proc = _start(start_cli, tmp_path, 3, 0)
    _wait_for(tmp_path / HANDSHAKE_MARKER, proc)
    [run] = cli("--output", "json", "runs", "list").data["runs"]
    assert cli("cancel", run["runId"]).rc == 0
    rc, outcome = _ended(proc)
    assert (rc, outcome["state"]) == (0, "succeeded")  # nothing was left to stop
    [effect] = _inspect(cli, outcome["runId"])["effects"]
    assert effect["status"] == "succeeded"
    assert _lines(tmp_path / MARKER) == [effect["effectId"]]
