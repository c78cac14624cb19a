"""Several ``agentctl run`` processes creating the same new database at once all succeed.

Creating a ledger file means switching it to WAL and migrating it; two processes doing that on
one fresh file used to collide (SQLite answers a concurrent rollback→WAL switch with an
immediate SQLITE_BUSY, exit 5). Each round here uses a fresh path, starts 4 runs together and
expects every one to exit 0 with its own succeeded run in the shared database.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, agentctl_argv, cli_env

ROUNDS = 20
PROCESSES = 4


def _start_together(db: Path, cwd: Path) -> list[subprocess.Popen[str]]:
    workflow = str(EXAMPLES / "hello.yaml")
    argv = agentctl_argv("--output", "json", "run", workflow, "--db", str(db), "--workspace", ".")
    return [
        subprocess.Popen(
            argv,
            cwd=cwd,
            env=cli_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]


@pytest.mark.slow
def test_four_runs_create_one_new_database_together(tmp_path: Path) -> None:
    for round_no in range(ROUNDS):
        work = tmp_path / f"round-{round_no}"
        work.mkdir()
        db = work / "state" / "runtime.db"
        procs = _start_together(db, work)
        run_ids = set()
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, (round_no, proc.returncode, err)
            data = json.loads(out)["data"]
            assert data["state"] == "succeeded", (round_no, data)
            run_ids.add(data["runId"])
        assert len(run_ids) == PROCESSES
        listed = subprocess.run(
            agentctl_argv("--output", "json", "runs", "list", "--db", str(db)),
            cwd=work,
            env=cli_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert listed.returncode == 0, listed.stderr
        assert {r["runId"] for r in json.loads(listed.stdout)["data"]["runs"]} == run_ids
