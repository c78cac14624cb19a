"""The state commands as a user calls them: artifacts, db, and refusals of future databases."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest

from tests.clibackend import LedgerTarget
from tests.conftest import EXAMPLES, REPO


@pytest.fixture
def hello_run(cli, tmp_path: Path) -> tuple[Path, str]:  # type: ignore[no-untyped-def]
    shutil.copy(EXAMPLES / "hello.yaml", tmp_path / "hello.yaml")
    db = tmp_path / "state" / "r.db"
    done = cli("--output", "json", "run", "hello.yaml", "--db", str(db))
    assert done.rc == 0, done.stderr
    return db, str(done.data["runId"])


def test_written_files_become_verified_artifacts(cli, backend, hello_run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db, run_id = hello_run
    listed = cli("--output", "json", "artifacts", "list", "--run", run_id, "--db", str(db))
    assert listed.rc == 0, listed.stderr
    [ref] = listed.data["references"]
    content = (tmp_path / "out" / "hello.txt").read_bytes()
    assert ref["path"] == "out/hello.txt" and ref["taskId"] == "save"
    assert ref["digest"] == "sha256:" + hashlib.sha256(content).hexdigest()
    blob = db.parent / "artifacts" / "sha256" / ref["digest"][7:9] / ref["digest"][7:]
    assert blob.read_bytes() == content
    assert stat.S_IMODE(blob.stat().st_mode) == 0o400
    assert stat.S_IMODE((db.parent / "artifacts").stat().st_mode) == 0o700
    if backend == "sqlite":  # PostgreSQL's rows are the server's files
        assert stat.S_IMODE(db.stat().st_mode) == 0o600
    ok = cli("--output", "json", "artifacts", "verify", "--all", "--db", str(db))
    assert ok.rc == 0 and ok.data["valid"] is True
    out = tmp_path / "copy.txt"
    exported = cli(
        "--output", "json", "artifacts", "export", ref["digest"], str(out), "--db", str(db)
    )
    assert exported.rc == 0 and out.read_bytes() == content
    again = cli("--output", "json", "artifacts", "export", ref["digest"], str(out), "--db", str(db))
    assert again.rc == 5 and "--overwrite" in again.error["error"]["message"]
    inspected = cli("--output", "json", "inspect", run_id, "--db", str(db)).data
    assert [a["digest"] for a in inspected["artifacts"]] == [ref["digest"]]


def test_a_digest_as_the_human_list_shows_it_names_its_blob(
    cli, backend, hello_run, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    db, _ = hello_run
    shown = cli("artifacts", "list", "--db", str(db))
    [digest] = cli("--output", "json", "artifacts", "list", "--db", str(db)).data["blobs"]
    whole = digest["digest"]
    short = whole[:19]  # sha256: and 12 hex, as the table prints it
    assert short in shown.stdout and whole not in shown.stdout
    inspected = cli("--output", "json", "artifacts", "inspect", short, "--db", str(db))
    assert inspected.rc == 0 and inspected.data["blob"]["digest"] == whole, inspected.stderr
    verified = cli("--output", "json", "artifacts", "verify", short, "--db", str(db))
    assert verified.rc == 0 and [a["digest"] for a in verified.data["artifacts"]] == [whole]
    out = tmp_path / "copy.txt"
    exported = cli("--output", "json", "artifacts", "export", short, str(out), "--db", str(db))
    assert exported.rc == 0 and out.read_bytes() == (tmp_path / "out" / "hello.txt").read_bytes()
    other = "sha256:" + ("0" if whole[7] != "0" else "1") * 12
    assert cli("artifacts", "inspect", other, "--db", str(db)).rc == 5  # no such blob
    assert cli("artifacts", "export", whole[:18], str(tmp_path / "x"), "--db", str(db)).rc == 2
    assert not (tmp_path / "x").exists()
    if backend == "sqlite":  # a second blob sharing the prefix: which one is meant is unknown
        with sqlite3.connect(db) as conn:
            twin = short + "f" * 52 if whole[19:] != "f" * 52 else short + "e" * 52
            conn.execute(
                "INSERT INTO artifact_blobs (digest, size_bytes, created_at) VALUES (?, 1, ?)",
                (twin, "2026-01-01T00:00:00.000Z"),
            )
        both = cli("--output", "json", "artifacts", "inspect", short, "--db", str(db))
        assert both.rc == 2 and "ambiguous" in both.error["error"]["message"]


def test_an_empty_run_filter_is_a_run_not_found_not_every_run(cli, hello_run) -> None:  # type: ignore[no-untyped-def]
    """``artifacts list --run ""`` listed every run's artifacts (the empty id was taken as no
    filter); it is a run id like any other, and no run has it: exit 5, as ``inspect ""``."""
    db, _ = hello_run
    for argv in (["artifacts", "list", "--run", ""], ["inspect", ""]):
        done = cli("--output", "json", *argv, "--db", str(db))
        assert done.rc == 5, (argv, done.stdout, done.stderr)
        assert "run '' not found" in done.error["error"]["message"]


def test_corrupted_blob_fails_verify_and_export(cli, hello_run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db, _run_id = hello_run
    ref = cli("--output", "json", "artifacts", "list", "--db", str(db)).data["references"][0]
    blob = db.parent / "artifacts" / "sha256" / ref["digest"][7:9] / ref["digest"][7:]
    os.chmod(blob, 0o600)
    blob.write_bytes(b"tampered")
    bad = cli("--output", "json", "artifacts", "verify", ref["digest"], "--db", str(db))
    assert bad.rc == 5
    assert ref["digest"] in bad.error["error"]["message"]
    target = tmp_path / "exported.txt"
    refused = cli(
        "--output", "json", "artifacts", "export", ref["digest"], str(target), "--db", str(db)
    )
    assert refused.rc == 5 and not target.exists()
    assert "details" not in refused.error["error"]  # docs/cli.md: export's error has none


def test_a_failed_verification_details_every_blob_as_the_docs_say(cli, hello_run) -> None:  # type: ignore[no-untyped-def]
    # `replay` of a run whose blob was altered, and `artifacts verify --all`, carry the
    # ArtifactVerification report as error.details; docs/cli.md said no such error had any.
    db, run_id = hello_run
    ref = cli("--output", "json", "artifacts", "list", "--db", str(db)).data["references"][0]
    blob = db.parent / "artifacts" / "sha256" / ref["digest"][7:9] / ref["digest"][7:]
    os.chmod(blob, 0o600)
    blob.write_bytes(b"tampered")
    failed = {"digest": ref["digest"], "sizeBytes": ref["sizeBytes"], "valid": False}
    for args in (("replay", run_id), ("artifacts", "verify", "--all")):
        bad = cli("--output", "json", *args, "--db", str(db))
        assert bad.rc == 5, bad.stderr
        details = bad.error["error"]["details"]
        assert set(details) == {"valid", "artifacts"} and details["valid"] is False
        [entry] = details["artifacts"]
        assert {k: entry[k] for k in failed} == failed and "differs" in entry["detail"]
    envelope = (REPO / "docs" / "cli.md").read_text(encoding="utf-8").split("### JSON")[1]
    assert "`details: {valid, artifacts}`" in envelope.split("- `data` keys")[0]


def test_db_stats_and_migrate(cli, backend, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "fresh" / "x.db"
    migrated = cli("--output", "json", "db", "migrate", "--db", str(db))
    assert migrated.rc == 0, migrated.stderr
    supported = migrated.data["to"]
    assert migrated.data["from"] == 0 and migrated.data["applied"] == list(range(1, supported + 1))
    stats = cli("--output", "json", "db", "stats", "--db", str(db)).data
    assert stats["schemaVersion"] == stats["supportedSchemaVersion"] == supported
    assert stats["journalMode"] == {"sqlite": "wal", "postgresql": "postgresql"}[backend]
    assert stats["counts"]["runs"] == 0
    again = cli("--output", "json", "db", "migrate", "--db", str(db)).data
    assert again["applied"] == []


COMMANDS = [
    ["run", "hello.yaml"],
    ["resume", "run-x"],
    ["inspect", "run-x"],
    ["cancel", "run-x"],
    ["runs", "list"],
    ["effects", "list", "run-x"],
    ["artifacts", "list"],
    ["artifacts", "verify", "--all"],
    ["artifacts", "gc"],
    ["db", "stats"],
    ["db", "migrate"],
]


def _make_newer(target: LedgerTarget, db: Path) -> int:
    """Give the ledger a schema version one past this agentctl's; returns the current one."""
    if target.backend == "postgresql":
        meta = "SELECT value FROM agentctl_meta WHERE name = 'schema_version'"
        [(version,)] = target.sql(db, meta)
        bump = "UPDATE agentctl_meta SET value = ? WHERE name = 'schema_version'"
        target.sql(db, bump, (str(int(version) + 1),))
        return int(version)
    with sqlite3.connect(db) as conn:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.execute(f"PRAGMA user_version={version + 1}")
    return int(version)


def _everything(target: LedgerTarget, db: Path) -> object:
    """What must not change: the SQLite file's bytes and companions, or PostgreSQL's rows."""
    if target.backend == "sqlite":
        return db.read_bytes(), sorted(p.name for p in db.parent.iterdir())
    tables = ("runs", "task_states", "effects", "audit_events", "artifact_refs", "agentctl_meta")
    return [target.sql(db, f"SELECT * FROM {t} ORDER BY 1") for t in tables]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_future_schema_is_refused_and_untouched(
    cli, ledger_target: LedgerTarget, hello_run, tmp_path: Path, command: list[str]
) -> None:  # type: ignore[no-untyped-def]
    db, _run_id = hello_run
    version = _make_newer(ledger_target, db)
    before = _everything(ledger_target, db)
    got = cli("--output", "json", *command, "--db", str(db))
    assert got.rc == 5, (command, got.rc, got.stderr)
    message = got.error["error"]["message"]
    assert str(version + 1) in message and str(version) in message
    assert _everything(ledger_target, db) == before


@pytest.mark.sqlite_only(reason="the ledger's own database file exists only on SQLite")
def test_export_never_overwrites_the_ledger_database(cli, hello_run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``artifacts export D st/r.db --db st/r.db --overwrite`` replaced the open ledger with the
    blob's bytes (every run lost); the database and the files beside it, however spelled, are
    refused (exit 2) and left as they were."""
    db, run_id = hello_run
    [ref] = cli("--output", "json", "artifacts", "list", "--db", str(db)).data["references"]
    (tmp_path / "link").symlink_to(db.parent)
    before = db.read_bytes()
    spellings = [
        str(db),
        f"./{db.parent.name}/../{db.parent.name}/{db.name}",
        f"link/{db.name}",
        f"{db}-wal",
        f"{db}-journal",
        f"{db}.lock",
    ]
    for dest in spellings:
        done = cli("--output", "json", "artifacts", "export", ref["digest"], dest, "--db", str(db), "--overwrite")  # fmt: skip
        assert done.rc == 2, (dest, done.stderr)
        assert "ledger's" in done.error["error"]["message"], dest
    assert db.read_bytes() == before and not Path(f"{db}-journal").exists()
    runs = cli("--output", "json", "runs", "list", "--db", str(db))
    assert runs.rc == 0 and run_id in runs.stdout


def test_export_never_writes_into_the_artifact_store(cli, hello_run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A destination inside the ledger's ``artifacts/`` (its own blob file included) was written:
    the store's files are the ledger's alone. Refused (exit 2), nothing written."""
    db, _ = hello_run
    [ref] = cli("--output", "json", "artifacts", "list", "--db", str(db)).data["references"]
    store = db.parent / "artifacts"
    blob = store / "sha256" / ref["digest"][7:9] / ref["digest"][7:]
    for dest in (blob, store / "new.txt", store / "sha256" / ".." / "tmp" / "x"):
        done = cli("--output", "json", "artifacts", "export", ref["digest"], str(dest), "--db", str(db), "--overwrite")  # fmt: skip
        assert done.rc == 2, (dest, done.stderr)
        assert "artifact store" in done.error["error"]["message"]
    assert not (store / "new.txt").exists() and not list((store / "tmp").iterdir())
    ok = cli("--output", "json", "artifacts", "verify", "--all", "--db", str(db))
    assert ok.rc == 0, ok.stderr
