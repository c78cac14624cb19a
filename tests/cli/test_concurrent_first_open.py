"""Several ``agentctl run`` processes creating the same new database at once all succeed.

Creating a ledger file means switching it to WAL and migrating it; two processes doing that on
one fresh file used to collide (SQLite answers a concurrent rollback→WAL switch with an
immediate SQLITE_BUSY, exit 5). On PostgreSQL the same race is several processes migrating one
empty database at once. Each round here uses a fresh database, starts 4 runs together and
expects every one to exit 0 with its own succeeded run in the shared database.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, Cli, StartCli

ROUNDS = 20
PROCESSES = 4


@pytest.mark.slow
def test_four_runs_create_one_new_database_together(
    cli: Cli, start_cli: StartCli, tmp_path: Path
) -> None:
    workflow = str(EXAMPLES / "hello.yaml")
    for round_no in range(ROUNDS):
        work = tmp_path / f"round-{round_no}"
        work.mkdir()
        db = str(work / "state" / "runtime.db")
        run = ("--output", "json", "run", workflow, "--db", db, "--workspace", ".")
        procs = [start_cli(*run, cwd=work) for _ in range(PROCESSES)]
        run_ids = set()
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, (round_no, proc.returncode, err)
            data = json.loads(out)["data"]
            assert data["state"] == "succeeded", (round_no, data)
            run_ids.add(data["runId"])
        assert len(run_ids) == PROCESSES
        listed = cli("--output", "json", "runs", "list", "--db", db, cwd=work)
        assert listed.rc == 0, listed.stderr
        assert {r["runId"] for r in listed.data["runs"]} == run_ids
