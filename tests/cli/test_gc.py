"""``agentctl gc`` from the outside: old terminal runs and expired memory go, with the value
blobs and artifacts only they used; running, paused and still-referenced runs stay."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.clibackend import LedgerTarget
from tests.conftest import EXAMPLES, Cli

OLD = "2000-01-01T00:00:00.000Z"
BIG = "x" * 70_000  # above the 64 KiB spill size: stored once as a value blob (ADR 0008)

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: big }
spec:
  policy: { approval: never, writableRoots: [out] }
  inputs:
    big: { type: string }
    note: { type: string }
  actions:
    save: { kind: builtin.write }
  tasks:
    - id: save
      uses: action:save
      with: { path: out/note.txt, content: "${{ inputs.note }}" }
"""


def _run(cli: Cli, *args: str) -> str:
    done = cli("--output", "json", *args)
    assert done.rc in (0, 3), done.stderr
    return str(done.data["runId"])


def _age(target: LedgerTarget, db: Path, runs: list[str]) -> None:
    """Make runs (and every blob) look written long ago: a raw edit, as an old ledger has."""
    for run in runs:
        target.sql(db, "UPDATE runs SET updated_at = ? WHERE run_id = ?", (OLD, run))
    target.sql(db, "UPDATE artifact_blobs SET created_at = ?", (OLD,))
    target.sql(db, "UPDATE long_term_memory SET expires_at = ? WHERE key = 'stale'", (OLD,))


def _blob_files(db: Path) -> set[str]:
    return {p.name for p in (db.parent / "artifacts" / "sha256").glob("*/*")}


def _value_digest(target: LedgerTarget, db: Path, run_id: str) -> str:
    [(text,)] = target.sql(db, "SELECT inputs_json FROM runs WHERE run_id = ?", (run_id,))
    return str(text).split('"$artifact":"sha256:')[1][:64]


def _artifact_digest(target: LedgerTarget, db: Path, run_id: str) -> str:
    [(digest,)] = target.sql(db, "SELECT digest FROM artifact_refs WHERE run_id = ?", (run_id,))
    return str(digest).removeprefix("sha256:")


def _ledger(cli: Cli, target: LedgerTarget, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """Runs: ``old`` (terminal, alone), ``shared`` (old, its big input also used by a new
    run), ``parent`` (old, a new replay of it exists), ``paused`` (old but not terminal)."""
    db = tmp_path / ".agentctl" / "runtime.db"
    wf = tmp_path / "big.yaml"
    wf.write_text(WORKFLOW)
    here = ("--db", str(db), "--workspace", str(tmp_path))  # outputs stay out of examples/
    runs = {
        "old": _run(cli, "run", str(wf), "--input", f"big=old-{BIG}", "--input", "note=one"),
        "shared": _run(cli, "run", str(wf), "--input", f"big={BIG}", "--input", "note=two"),
        "new": _run(cli, "run", str(wf), "--input", f"big={BIG}", "--input", "note=three"),
        "parent": _run(cli, "run", str(EXAMPLES / "hello.yaml"), *here),
        "paused": _run(cli, "run", str(EXAMPLES / "e6-approval.yaml"), *here),
    }
    runs["replay"] = _run(cli, "replay", runs["parent"])
    for key, retention in (("stale", "1"), ("fresh", "30")):
        put = ("memory", "put", "ns", key, '"v"', "--retention-days", retention)
        assert cli(*put).rc == 0
    _age(target, db, [runs[k] for k in ("old", "shared", "parent", "paused")])
    return db, runs


def test_gc_removes_old_terminal_runs_and_what_only_they_used(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    db, runs = _ledger(cli, ledger_target, tmp_path)
    old_value = _value_digest(ledger_target, db, runs["old"])
    old_file = _artifact_digest(ledger_target, db, runs["old"])
    shared_value = _value_digest(ledger_target, db, runs["shared"])
    files = _blob_files(db)
    assert {old_value, old_file, shared_value} <= files

    dry = cli("--output", "json", "gc", "--dry-run")
    assert dry.rc == 0, dry.stderr
    assert dry.data["dryRun"] is True
    assert dry.data["runs"] == sorted([runs["old"], runs["shared"]])
    assert dry.data["memoryEntries"] == 1 and dry.data["removed"] == 3
    assert _blob_files(db) == files  # a dry run changes nothing
    assert cli("inspect", runs["old"]).rc == 0

    done = cli("--output", "json", "gc")
    assert done.rc == 0, done.stderr
    assert done.data["runs"] == dry.data["runs"] and done.data["valueBlobsUnpinned"] == 1
    for gone in ("old", "shared"):
        assert cli("inspect", runs[gone]).rc == 5
    for kept in ("new", "parent", "replay", "paused"):
        assert cli("inspect", runs[kept]).rc == 0, kept
    left = _blob_files(db)
    assert old_value not in left and old_file not in left
    assert shared_value in left  # the new run's input names it
    stale = cli("--output", "json", "memory", "get", "ns", "stale")
    assert stale.rc == 0 and stale.data["createdAt"] is None  # gone: reads as absent
    assert cli("--output", "json", "memory", "get", "ns", "fresh").data["createdAt"] is not None
    assert cli("artifacts", "verify", "--all").rc == 0
    assert cli("--output", "json", "inspect", runs["new"]).data["run"]["runId"] == runs["new"]
    again = cli("--output", "json", "gc")
    assert again.data["removed"] == 0 and again.data["runs"] == []


def test_gc_keeps_everything_younger_than_the_cutoff(cli: Cli, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    where = ("--db", str(db), "--workspace", str(tmp_path))  # outputs stay out of examples/
    run = _run(cli, "run", str(EXAMPLES / "hello.yaml"), *where)
    done = cli("--output", "json", "gc", "--db", str(db))
    assert done.rc == 0 and done.data["removed"] == 0
    assert cli("inspect", run, "--db", str(db)).rc == 0
    human = cli("gc", "--older-than-days", "0", "--db", str(db))
    assert human.rc == 0 and run in human.stdout
    lines = human.stdout.splitlines()  # the removed runs are listed under the runs line
    assert lines[0].startswith("removed 1 terminal run last updated before "), lines
    assert lines[1] == f"  {run}", lines
    assert cli("inspect", run, "--db", str(db)).rc == 5


@pytest.mark.sqlite_only(reason="a database that does not exist yet is a missing SQLite file")
def test_gc_of_a_missing_database_opens_a_new_empty_one(cli: Cli, tmp_path: Path) -> None:
    # A state command's --db is opened as spec/cli.md says ("parents created", "opening
    # migrates"): nothing to collect there.
    done = cli("--output", "json", "gc", "--db", str(tmp_path / "new" / "none.db"))
    assert done.rc == 0, done
    assert done.data["removed"] == 0 and done.data["runs"] == []
    assert (tmp_path / "new" / "none.db").is_file()


@pytest.mark.sqlite_only(reason="the store lies beside the SQLite file (db dir/artifacts)")
@pytest.mark.parametrize("command", [("artifacts", "gc"), ("gc",)])
def test_gc_dry_run_reports_a_stale_tmp_file_and_keeps_it(
    cli: Cli, tmp_path: Path, command: tuple[str, ...]
) -> None:
    # spec/cli.md §8: stale tmp files are GC candidates and a dry run "reports and rolls back".
    # Opening the store for the dry run must not run the crash recovery that empties tmp/.
    db = tmp_path / "r.db"
    where = ("--db", str(db), "--workspace", str(tmp_path))
    _run(cli, "run", str(EXAMPLES / "hello.yaml"), *where)
    stale = tmp_path / "artifacts" / "tmp" / "left.part"
    stale.write_bytes(b"partial")
    dry = cli("--output", "json", *command, "--dry-run", "--db", str(db))
    assert dry.rc == 0, dry.stderr
    report = dry.data["report"] if command == ("artifacts", "gc") else dry.data["artifacts"]
    assert report["tmpFiles"] == ["left.part"]
    assert stale.read_bytes() == b"partial"
    done = cli("--output", "json", *command, "--db", str(db))
    assert done.rc == 0, done.stderr
    report = done.data["report"] if command == ("artifacts", "gc") else done.data["artifacts"]
    assert report["tmpFiles"] == ["left.part"]  # the real run reports what it removed
    assert not stale.exists()


def test_gc_human_text_counts_untracked_and_temporary_files(cli: Cli, tmp_path: Path) -> None:
    # The human report counted only unreferenced blobs, though gc also removes (and --dry-run
    # lists in JSON) untracked files in the store and temporary leftovers: both are counted.
    db = tmp_path / "r.db"
    _run(cli, "run", str(EXAMPLES / "hello.yaml"), "--db", str(db), "--workspace", str(tmp_path))
    store = tmp_path / "artifacts"
    stray = store / "sha256" / "ab" / ("ab" + "0" * 62)
    stray.parent.mkdir(exist_ok=True)
    stray.write_bytes(b"not a blob")
    (store / "tmp" / "left.part").write_bytes(b"partial")
    for path in (stray, store / "tmp" / "left.part"):
        os.utime(path, (946684800, 946684800))  # 2000: older than any grace period
    dry = cli("gc", "--dry-run", "--db", str(db))
    assert dry.rc == 0, dry.stderr
    assert (
        "would remove 0 unreferenced artifact blobs, 1 untracked file in the artifact "
        in dry.stdout
    )
    assert "and 1 temporary leftover" in dry.stdout
    done = cli("gc", "--db", str(db))
    assert done.rc == 0, done.stderr
    assert "removed 0 unreferenced artifact blobs, 1 untracked file in the artifact store and 1 temporary leftover" in done.stdout  # fmt: skip
    assert not stray.exists() and not (store / "tmp" / "left.part").exists()
