"""The artifact store: ingest, references + lease release, verify, export, GC."""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ledger_helpers import T0, make_run, ts

from agentctl.errors import InvalidOperationError, NotFoundError, PersistenceError
from agentctl.ledger import TaskCompletion
from agentctl.ledger.artifacts import refs
from agentctl.ledger.artifacts.gc import run_gc
from agentctl.ledger.artifacts.refs import _blob_row_txn, fetch_all, list_blobs, list_refs
from agentctl.ledger.artifacts.store import ArtifactStore, open_artifact_store
from agentctl.ledger.connection import Database
from agentctl.ledger.tasks import commit_tasks_txn, transition_task_txn

LATER = "2024-07-01T12:00:00.000Z"  # > 30 days after T0, when every lease has expired


@pytest.fixture
def store(ledger: Database) -> Iterator[ArtifactStore]:
    yield open_artifact_store(ledger)


def _file(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / "ws" / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    return path


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_layout_and_modes(store: ArtifactStore, tmp_path: Path) -> None:
    result = store.ingest(_file(tmp_path, "a.txt", b"hello"), T0)
    assert result.digest == _digest(b"hello") and result.size_bytes == 5
    blob = store.blob_path(result.digest)
    assert blob.read_bytes() == b"hello"
    assert blob.parent.parent == store.root / "sha256"
    assert _mode(blob) == 0o400
    for d in (store.root, store.root / "tmp", store.root / "trash", blob.parent):
        assert _mode(d) == 0o700
    assert _mode(store.root / ".lock") == 0o600
    assert list(store.tmp_dir.iterdir()) == []


def test_ingest_dedupes_and_refuses_symlinks_and_dirs(store: ArtifactStore, tmp_path: Path) -> None:
    src = _file(tmp_path, "a.txt", b"same")
    first = store.ingest(src, T0)
    second = store.ingest(_file(tmp_path, "b.txt", b"same"), T0)
    assert first.digest == second.digest and first.lease_id != second.lease_id
    link = tmp_path / "ws" / "link"
    link.symlink_to(src)
    with pytest.raises(InvalidOperationError, match="symlink"):
        store.ingest(link, T0)
    with pytest.raises(InvalidOperationError):
        store.ingest(tmp_path / "ws", T0)
    with store.ledger.read() as conn:
        assert len(list_blobs(conn)) == 1


def test_completion_commits_refs_and_releases_lease(
    ledger: Database, store: ArtifactStore, tmp_path: Path
) -> None:
    make_run(ledger)
    got = store.ingest(_file(tmp_path, "out.json", b"{}"), T0, run_id="run-1", task_id="a")
    with ledger.transaction() as conn:
        transition_task_txn(conn, "run-1", "a", "ready", ts(1))
        transition_task_txn(conn, "run-1", "a", "running", ts(2), attempt=1)
        done = TaskCompletion(
            "a", "succeeded", 1, artifacts=[got.ref("out.json")], ingest_lease_ids=[got.lease_id]
        )
        commit_tasks_txn(conn, "run-1", [done], None, ts(3))
    with ledger.read() as conn:
        (ref,) = list_refs(conn, run_id="run-1", task_id="a")
        assert (ref.digest, ref.media_type, ref.logical_path) == (
            got.digest,
            "application/json",
            "out.json",
        )
        assert conn.execute("SELECT COUNT(*) FROM artifact_ingests").fetchone()[0] == 0
    report = run_gc(store, LATER)  # referenced: never collected
    assert report["report"]["blobs"] == []
    assert store.blob_path(got.digest).exists()


def test_verify_and_export(store: ArtifactStore, tmp_path: Path) -> None:
    got = store.ingest(_file(tmp_path, "a.bin", b"payload"), T0)
    assert store.verify(ts(5), [got.digest])["valid"] is True
    with store.ledger.read() as conn:
        assert list_blobs(conn)[0].last_verified_at == ts(5)
    dest = tmp_path / "out" / "a.bin"
    dest.parent.mkdir()
    assert store.export(got.digest, dest) == {
        "digest": got.digest,
        "destination": str(dest),
        "bytes": 7,
    }
    assert dest.read_bytes() == b"payload"
    with pytest.raises(PersistenceError, match="overwrite"):
        store.export(got.digest, dest)
    store.export(got.digest, dest, overwrite=True)
    link = tmp_path / "out" / "link"
    link.symlink_to(tmp_path / "out" / "elsewhere")
    with pytest.raises(PersistenceError, match="symlink"):
        store.export(got.digest, link, overwrite=True)
    assert not (tmp_path / "out" / "elsewhere").exists()
    with pytest.raises(NotFoundError):
        store.export("sha256:" + "0" * 64, tmp_path / "x")


def test_corrupted_blob_is_reported_and_not_exported(store: ArtifactStore, tmp_path: Path) -> None:
    got = store.ingest(_file(tmp_path, "a.bin", b"original"), T0)
    blob = store.blob_path(got.digest)
    os.chmod(blob, 0o600)
    blob.write_bytes(b"tampered")  # same size, other content
    with pytest.raises(PersistenceError) as info:
        store.verify(ts(1))
    assert info.value.exit_code == 5
    assert info.value.data["valid"] is False
    assert info.value.data["artifacts"][0]["detail"] == "content does not match its digest"
    with pytest.raises(PersistenceError, match="verification"):
        store.export(got.digest, tmp_path / "out.bin")
    assert not (tmp_path / "out.bin").exists()
    store.ingest(_file(tmp_path, "again.bin", b"original"), T0)  # re-ingest repairs the blob
    assert store.verify(ts(2))["valid"] is True


def test_gc_collects_only_unreachable_old_blobs(store: ArtifactStore, tmp_path: Path) -> None:
    old = store.ingest(_file(tmp_path, "old", b"old"), T0)
    fresh = store.ingest(_file(tmp_path, "fresh", b"fresh"), "2024-06-30T12:00:00.000Z")
    stray = store.blobs_dir / "ab" / ("ab" + "0" * 62)
    stray.parent.mkdir()
    stray.write_bytes(b"untracked")
    hours_ago = time.time() - 2 * 3600  # a file left by an ingest that died long ago
    os.utime(stray, (hours_ago, hours_ago))
    (store.tmp_dir / "left.part").write_bytes(b"partial")
    dry = run_gc(store, LATER, dry_run=True)
    assert dry["dryRun"] is True and dry["before"] == "2024-06-01T12:00:00.000Z"
    assert [b["digest"] for b in dry["report"]["blobs"]] == [old.digest]
    assert dry["report"]["untrackedFiles"] == [f"sha256/ab/{stray.name}"]
    assert dry["report"]["tmpFiles"] == ["left.part"]
    assert store.blob_path(old.digest).exists() and stray.exists()  # dry run changed nothing
    real = run_gc(store, LATER)
    assert real["report"] == dry["report"]
    assert not store.blob_path(old.digest).exists() and not stray.exists()
    assert store.blob_path(fresh.digest).exists()  # newer than the cutoff
    assert list(store.trash_dir.iterdir()) == [] and list(store.tmp_dir.iterdir()) == []
    with store.ledger.read() as conn:
        assert [b.digest for b in list_blobs(conn)] == [fresh.digest]


def test_gc_keeps_blobs_under_a_live_lease(store: ArtifactStore, tmp_path: Path) -> None:
    got = store.ingest(_file(tmp_path, "a", b"leased"), T0)
    report = run_gc(store, "2024-05-01T12:30:00.000Z", older_than_days=0)
    assert report["report"]["blobs"] == [] and store.blob_path(got.digest).exists()
    later = run_gc(store, "2024-05-01T13:30:00.000Z", older_than_days=0)
    assert later["report"]["expiredLeases"] == 1
    assert [b["digest"] for b in later["report"]["blobs"]] == [got.digest]


def test_listing_chosen_blobs_reads_them_in_chunks_and_in_digest_order(
    ledger: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # More digests than one IN list binds: every wanted blob once, in digest order, no other.
    digests = [f"sha256:{i:064x}" for i in range(1_200)]
    with ledger.transaction() as conn:
        for digest in digests:
            _blob_row_txn(conn, digest, 1, T0)
    wanted = [*digests[::-1][:1_050], "sha256:" + "f" * 64]  # one unknown: not listed
    fetched: list[int] = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        rows = fetch_all(*args, **kwargs)
        fetched.append(len(rows))
        return rows

    monkeypatch.setattr(refs, "fetch_all", counting)
    with ledger.read() as conn:
        listed = list_blobs(conn, wanted)
    assert [b.digest for b in listed] == sorted(digests[-1_050:])
    assert {b.reference_count for b in listed} == {0}
    # Only the wanted blobs were read (each costs a reference count), not the whole store.
    assert sum(fetched) == 1_050 and len(fetched) == 3
