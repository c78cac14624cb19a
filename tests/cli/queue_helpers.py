"""Helpers of the run-queue tests: a marker workflow, serve processes, ledger reads.

The workflow's three tasks run one after another, each appending one line (``TAG TASK``) to
the run's marker file ``markers/TAG.log``: a line per executed effect, so a count of lines
is a count of executions. The ledger is read directly (the test is an observer, never a
writer), through one small query helper per backend.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import agentctl_argv, cli_env

TASKS = ("a", "b", "c")

MARKER_WORKFLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: markers }
spec:
  inputs: { tag: "", pause: "0" }
  policy: { approval: never, processAllowlist: [sh] }
  actions:
    a: { kind: builtin.shell.exec, command: sh, args: [-c, 'sleep "$P"; echo "$T a" >> "markers/$T.log"'], env: { T: "${{ inputs.tag }}", P: "${{ inputs.pause }}" }, timeoutSeconds: 30 }
    b: { kind: builtin.shell.exec, command: sh, args: [-c, 'echo "$T b" >> "markers/$T.log"'], env: { T: "${{ inputs.tag }}" }, timeoutSeconds: 30 }
    c: { kind: builtin.shell.exec, command: sh, args: [-c, 'echo "$T c" >> "markers/$T.log"'], env: { T: "${{ inputs.tag }}" }, timeoutSeconds: 30 }
  tasks:
    - { id: a, uses: "action:a" }
    - { id: b, uses: "action:b", needs: [a] }
    - { id: c, uses: "action:c", needs: [b] }
"""


Query = Callable[[str, Sequence[object]], list[tuple[Any, ...]]]


def sqlite_query(db: Path) -> Query:
    """Read-only queries against the SQLite ledger at ``db``."""

    def run(sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
        try:
            return [tuple(r) for r in conn.execute(sql, tuple(params)).fetchall()]
        finally:
            conn.close()

    return run


def markers(workspace: Path) -> dict[str, list[str]]:
    """``tag → lines`` of every marker file."""
    found = {}
    for path in sorted((workspace / "markers").glob("*.log")):
        found[path.stem] = path.read_text(encoding="utf-8").split("\n")[:-1]
    return found


@dataclass
class Serve:
    proc: subprocess.Popen[str]

    def report(self, timeout: float = 300) -> dict[str, Any]:
        out, err = self.proc.communicate(timeout=timeout)
        assert self.proc.returncode == 0, err
        data: dict[str, Any] = json.loads(out)["data"]
        return data


def start_serve(cwd: Path, db: str, *extra: str) -> Serve:
    argv = agentctl_argv("--output", "json", "serve", "--db", db, *extra)
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    return Serve(proc)


def wait_for(condition: Callable[[], bool], timeout: float = 120, what: str = "") -> None:
    """Poll ``condition`` (a state the test waits for, not a timing goal)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
