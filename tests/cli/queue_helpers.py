"""Helpers of the run-queue tests: a marker workflow, serve processes, ledger reads.

The workflow's three tasks run one after another, each appending one line (``TAG TASK``) to
the run's marker file ``markers/TAG.log``: a line per executed effect, so a count of lines
is a count of executions. Task a first sleeps ``pause`` seconds, then waits while a file
``markers/TAG.hold`` exists (a test holds an effect in flight as long as it needs). The ledger is read directly (the test observes, it never
writes), through the backend's ``LedgerTarget.sql``.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.clibackend import LedgerTarget, SqlParam

TASKS = ("a", "b", "c")

MARKER_WORKFLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: markers }
spec:
  inputs: { tag: "", pause: "0" }
  policy: { approval: never, processAllowlist: [sh] }
  actions:
    a: { kind: builtin.shell.exec, command: sh, args: [-c, 'sleep "$P"; while [ -e "markers/$T.hold" ]; do sleep 0.1; done; echo "$T a" >> "markers/$T.log"'], env: { T: "${{ inputs.tag }}", P: "${{ inputs.pause }}" }, timeoutSeconds: 30 }
    b: { kind: builtin.shell.exec, command: sh, args: [-c, 'echo "$T b" >> "markers/$T.log"'], env: { T: "${{ inputs.tag }}" }, timeoutSeconds: 30 }
    c: { kind: builtin.shell.exec, command: sh, args: [-c, 'echo "$T c" >> "markers/$T.log"'], env: { T: "${{ inputs.tag }}" }, timeoutSeconds: 30 }
  tasks:
    - { id: a, uses: "action:a" }
    - { id: b, uses: "action:b", needs: [a] }
    - { id: c, uses: "action:c", needs: [b] }
"""


Query = Callable[[str, Sequence[SqlParam]], list[tuple[Any, ...]]]


def ledger_query(target: LedgerTarget, db_file: Path) -> Query:
    """Queries (``?`` placeholders, portable SQL) on the ledger standing for ``db_file``."""

    def run(sql: str, params: Sequence[SqlParam] = ()) -> list[tuple[Any, ...]]:
        return target.sql(
            db_file, sql, [p if p is None else str(p) if isinstance(p, str) else p for p in params]
        )

    return run


def no_writer_stopped_mid_transaction(target: LedgerTarget, db_file: Path) -> bool:
    """Whether no connection is inside a write transaction now: on SQLite the one write lock
    is free, on PostgreSQL no session is idle in a transaction (a stopped process there would
    hold its row locks, and a claim skips locked rows)."""
    if target.backend == "postgresql":
        rows = target.sql(
            db_file,
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND state IN ('idle in transaction', 'idle in transaction (aborted)')",
        )
        return int(rows[0][0]) == 0
    conn = sqlite3.connect(db_file, timeout=0.2, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()


def markers(workspace: Path) -> dict[str, list[str]]:
    """``tag → lines`` of every marker file."""
    found = {}
    for path in sorted((workspace / "markers").glob("*.log")):
        found[path.stem] = path.read_text(encoding="utf-8").split("\n")[:-1]
    return found


def serve_report(proc: subprocess.Popen[str], timeout: float = 600) -> dict[str, Any]:
    """The ``ServeReport`` of a finished ``serve`` process (which must exit 0)."""
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    data: dict[str, Any] = json.loads(out)["data"]
    return data


def wait_for(condition: Callable[[], bool], timeout: float = 120, what: str = "") -> None:
    """Poll ``condition`` (a state the test waits for, not a timing goal)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
