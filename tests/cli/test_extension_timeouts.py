"""``extension.process`` under its ``timeoutSeconds``, through the CLI: the bound is per call.

The extension sleeps as its arguments say (handshake, then invocation) and marks each
invocation in ``invoked.txt``, so the tests can tell whether anything was invoked.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from tests.conftest import Cli
from tests.sleepy_extension import MARKER, SCRIPT

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{ name: ext-timeouts }}
spec:
  policy: {{ approval: never, processAllowlist: [{program}] }}
  actions:
    e:
      kind: extension.process
      command: {python}
      args: [ext.py, "{handshake}", "{invoke}"]
      timeoutSeconds: {timeout}
      protocolVersion: agentctl.dev/process-extension/v1
      inputSchema: {{ type: object }}
      outputSchema: {{ type: object }}
      capabilities: [c]
  tasks:
    - {{ id: t, uses: action:e, with: {{}}, retry: {{ maxAttempts: 2 }} }}
"""
EXTENSION = f"extension '{os.path.basename(sys.executable)} ext.py'"


def _run(cli: Cli, tmp_path: Path, handshake: float, invoke: float, timeout: int) -> Any:
    (tmp_path / "ext.py").write_text(SCRIPT)
    program, python = os.path.basename(sys.executable), sys.executable
    text = WORKFLOW.format(
        program=program, python=python, handshake=handshake, invoke=invoke, timeout=timeout
    )
    (tmp_path / "wf.yaml").write_text(text)
    return cli("--output", "json", "run", "wf.yaml")


def _effects(cli: Cli, run_id: str) -> list[dict[str, Any]]:
    listed = cli("--output", "json", "effects", "list", run_id)
    assert listed.rc == 0, listed.stderr
    return list(listed.data["effects"])


def _marker(tmp_path: Path) -> list[str]:
    path = tmp_path / MARKER
    return path.read_text().split() if path.exists() else []


def test_a_handshake_that_times_out_fails_retryably_and_invokes_nothing(
    cli: Cli, tmp_path: Path
) -> None:
    # It used to be left uncertain ("effect timed out after 1.0 s"): resume then refused
    # to go on until an operator reconciled an effect that never invoked anything.
    done = _run(cli, tmp_path, handshake=60, invoke=0, timeout=1)
    assert done.rc == 4, (done.stdout, done.stderr)
    effects = _effects(cli, done.error["error"]["runId"])
    assert [e["status"] for e in effects] == ["failed", "failed"]  # retried: nothing was sent
    expected = f"{EXTENSION} (handshake) was stopped: timed out after 1 s"
    assert [e["error"] for e in effects] == [expected, expected]
    assert _marker(tmp_path) == []


def test_each_call_has_its_own_timeout(cli: Cli, tmp_path: Path) -> None:
    # Each call stays within the 3 s, both together do not: the bound is per call
    # (docs/protocols.md), not one deadline for the two.
    done = _run(cli, tmp_path, handshake=1.8, invoke=1.8, timeout=3)
    assert done.rc == 0, (done.stdout, done.stderr)
    [effect] = _effects(cli, done.data["runId"])
    assert effect["status"] == "succeeded"
    assert len(_marker(tmp_path)) == 1


def test_an_invocation_that_times_out_is_uncertain_and_names_the_call(
    cli: Cli, tmp_path: Path
) -> None:
    done = _run(cli, tmp_path, handshake=0, invoke=60, timeout=1)
    assert done.rc == 4, (done.stdout, done.stderr)
    [effect] = _effects(cli, done.error["error"]["runId"])  # never invoked again
    assert effect["status"] == "uncertain"
    assert effect["error"] == f"{EXTENSION} (invoke) timed out after 1 s"
    assert len(_marker(tmp_path)) == 1
