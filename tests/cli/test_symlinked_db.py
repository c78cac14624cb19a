"""A ``--db`` that is a symlink to the database file keeps the ledger's state in one place.

SQLite follows the link: the database, its ``-wal`` and ``-shm`` live beside the real file.
The artifact store (spec/cli.md §8: ``<db dir>/artifacts/``), the ``.lock`` and the
``.workers`` registry belong to that same ledger, so they go beside the real file too. Kept
beside the link instead, the blobs of runs driven through it were missing for every command
that named the real file (``replay`` and ``artifacts verify`` exit 5), a backup of the
database's directory lacked them, and each spelling kept its own worker registry.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, Cli

pytestmark = pytest.mark.sqlite_only(reason="a symlinked SQLite database file; a URL has none")


def test_state_beside_the_real_database_file(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(EXAMPLES / "hello.yaml", work / "wf.yaml")  # one recorded write: an artifact
    (work / "r.db").symlink_to(Path("..") / "state" / "r.db")  # dangling until the run
    ran = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", cwd=work)
    assert ran.rc == 0, ran.stderr
    assert sorted(p.name for p in work.iterdir()) == ["out", "r.db", "wf.yaml"]
    assert (tmp_path / "state" / "r.db").is_file()
    assert (tmp_path / "state" / "artifacts").is_dir()
    run_id = str(ran.data["runId"])
    # Through the real file, from elsewhere: the run's blobs are there.
    assert cli("artifacts", "verify", "--all", "--db", "state/r.db").rc == 0
    replayed = cli("--output", "json", "replay", run_id, "--db", "state/r.db")
    assert replayed.rc == 0, replayed.stderr
    assert sorted(p.name for p in work.iterdir()) == ["out", "r.db", "wf.yaml"]
