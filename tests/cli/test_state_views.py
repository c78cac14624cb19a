"""The human views of the state commands (``db``, ``artifacts``, ``memory``): a few lines that
answer the question asked, with digests whole — never the indented JSON record, which
``--output json`` keeps.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, Cli


def _hello(cli: Cli, tmp_path: Path) -> str:
    """Run the bundled hello example (one file written); the artifact's digest."""
    shutil.copy(EXAMPLES / "hello.yaml", tmp_path / "hello.yaml")
    ran = cli("--output", "json", "run", "hello.yaml", "--db", "r.db")
    assert ran.rc == 0, ran.stderr
    refs = cli("--output", "json", "artifacts", "list", "--db", "r.db").data["references"]
    return str(refs[0]["digest"])


def _view(cli: Cli, *args: str) -> str:
    shown = cli(*args, "--db", "r.db")
    assert shown.rc == 0, shown.stderr
    assert not shown.stdout.lstrip().startswith("{"), shown.stdout
    return shown.stdout


def test_artifact_views_name_the_blob_its_references_and_what_was_done(
    cli: Cli, tmp_path: Path
) -> None:
    digest = _hello(cli, tmp_path)
    inspected = _view(cli, "artifacts", "inspect", digest)
    assert inspected.startswith(digest + "\n") and "12 bytes" in inspected
    assert "1 reference" in inspected and "task save  out/hello.txt" in inspected
    assert _view(cli, "artifacts", "verify", "--all") == "1 blob checked: all valid\n"
    exported = _view(cli, "artifacts", "export", digest, "copy.txt")
    assert exported == f"wrote copy.txt (12 bytes, {digest})\n"
    assert (tmp_path / "copy.txt").read_text() == "hello, world"
    collected = _view(cli, "artifacts", "gc", "--dry-run")
    assert "would remove 0 blobs and 0 stray files" in collected
    # A temporary leftover is named by its path under the store, not as a blob.
    [store] = {p.parent for p in tmp_path.rglob("sha256") if (p.parent / "tmp").is_dir()}
    (store / "tmp" / "leftover").write_text("x")
    collected = _view(cli, "artifacts", "gc", "--dry-run")
    assert "would remove 0 blobs and 1 stray file" in collected
    assert "  tmp/leftover (temporary leftover)\n" in collected


def test_memory_views_show_the_value_and_where_it_lives(cli: Cli, tmp_path: Path) -> None:
    args = ("memory", "put", "notes", "today", '{"done": [1, 2]}', "--retention-days", "3")
    written = _view(cli, *args)
    assert written.startswith("wrote notes/today, expires ")
    got = _view(cli, "memory", "get", "notes", "today")
    head, value = got.split("\n", 1)
    assert head.startswith("notes/today  (updated ") and "expires" in head
    assert value == '{\n  "done": [\n    1,\n    2\n  ]\n}\n'
    reindexed = _view(cli, "memory", "reindex", "notes")
    assert reindexed.startswith("reindexed 1 entry of notes (")


@pytest.mark.sqlite_only(reason="db stats reports the SQLite file's path and size")
def test_db_views_give_the_schema_and_the_tables_that_hold_rows(cli: Cli, tmp_path: Path) -> None:
    _hello(cli, tmp_path)
    stats = _view(cli, "db", "stats")
    version = cli("--output", "json", "db", "stats", "--db", "r.db").data["schemaVersion"]
    assert stats.startswith(f"r.db  schema {version} (this agentctl: {version})")
    rows = dict(line.split() for line in stats.splitlines()[1:] if not line.strip().startswith("("))
    assert rows["runs"] == "1" and rows["artifact_blobs"] == "1" and "approvals" not in rows
    assert "other tables empty)" in stats
    assert _view(cli, "db", "migrate") == f"schema {version}: up to date, nothing to migrate\n"
