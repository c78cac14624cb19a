"""A retry's backoff outlives a crash: a resume that finds a task ``retry_scheduled`` waits
out what is left of its ``backoffMs`` (spec/dsl.md §4.5), counted from when the retry was
recorded, instead of starting the next attempt at once (a provider that just answered 429
would be called again straight away)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.clibackend import LedgerTarget
from tests.conftest import Cli

# The fake provider fails the first request of each process (retryable), then answers.
WORKFLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: backoff }
spec:
  providers: { sim: { kind: fake } }
  agents:
    w: { provider: sim, model: m, instructions: echo, maxTurns: 1, providerOptions: { failFirst: 1 } }
  tasks:
    - { id: first, uses: "agent:w", with: { prompt: one }, retry: { maxAttempts: 3, backoffMs: 60000 } }
"""


def _effects(target: LedgerTarget, db: Path) -> int:
    try:
        return int(target.sql(db, "SELECT COUNT(*) FROM effects")[0][0])
    except Exception:  # the ledger is not there yet
        return 0


def _scheduled(target: LedgerTarget, db: Path) -> bool:
    try:
        rows = target.sql(db, "SELECT state FROM task_states WHERE task_id = 'first'")
    except Exception:  # the ledger is not there yet
        return False
    return bool(rows) and rows[0][0] == "retry_scheduled"


def test_a_resume_waits_out_the_rest_of_a_backoff_the_crash_interrupted(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    db = tmp_path / "s" / "r.db"
    how = ledger_target.invocation(["run", "wf.yaml", "--db", "s/r.db"], tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentctl", *how.args],
        cwd=tmp_path,
        env=how.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not _scheduled(ledger_target, db):  # attempt 1 failed; a one-minute backoff runs
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    proc.kill()
    proc.wait(timeout=60)
    assert _effects(ledger_target, db) == 1
    run_id = cli("--output", "json", "runs", "list", "--db", "s/r.db").data["runs"][0]["runId"]
    # The resume is cut off after 3 s: far within the backoff, so no second attempt starts.
    resumed = cli("resume", run_id, "--db", "s/r.db", "--timeout-seconds", "3")
    assert resumed.rc == 130, resumed.stderr
    assert _effects(ledger_target, db) == 1
