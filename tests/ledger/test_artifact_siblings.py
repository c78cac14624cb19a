"""Ledgers in one directory share one artifact store: no ledger removes another's bytes.

Each test opens two real SQLite ledgers side by side (``a.db`` and ``b.db``), as two
``--db`` paths in one directory do, and checks that collection, recovery and a refused
ingest of one leave every file the other names.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ledger_helpers import T0

from agentctl.ledger.artifacts.gc import run_gc
from agentctl.ledger.artifacts.store import ArtifactStore, IngestOwner, open_artifact_store
from agentctl.ledger.connection import Database, open_database

LATER = "2024-07-01T12:00:00.000Z"  # > 30 days after T0, when every lease has expired


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _source(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / "ws" / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[ArtifactStore, ArtifactStore]]:
    a: Database = open_database(tmp_path / "state" / "a.db")
    b: Database = open_database(tmp_path / "state" / "b.db")
    try:
        yield open_artifact_store(a), open_artifact_store(b)
    finally:
        a.close()
        b.close()


def test_gc_of_one_ledger_keeps_the_files_the_other_names(
    pair: tuple[ArtifactStore, ArtifactStore], tmp_path: Path
) -> None:
    a, b = pair
    assert a.root == b.root  # one store for the directory
    a.ingest(_source(tmp_path, "both", b"both"), T0)
    a.ingest(_source(tmp_path, "a-only", b"a-only"), T0)
    b.ingest(_source(tmp_path, "both", b"both"), T0)
    b.ingest(_source(tmp_path, "b-only", b"b-only"), LATER)  # no row in a: untracked there
    report = run_gc(a, LATER)["report"]
    assert sorted(x["digest"] for x in report["blobs"]) == sorted(
        [_digest(b"both"), _digest(b"a-only")]
    )
    assert report["sharedFiles"] == [_digest(b"both")]
    assert report["untrackedFiles"] == [] and report["unreadableLedgers"] == []
    assert report["bytes"] == len(b"a-only")  # only what was a's alone is freed
    assert not a.blob_path(_digest(b"a-only")).exists()
    assert b.verify(LATER)["valid"] is True  # b's "both" and "b-only" are whole
    # Once b no longer names "both" either, its file goes with b's own collection.
    assert run_gc(b, "2024-09-01T12:00:00.000Z")["report"]["sharedFiles"] == []
    assert not b.blob_path(_digest(b"both")).exists()


def test_an_unreadable_ledger_beside_keeps_every_file(
    pair: tuple[ArtifactStore, ArtifactStore], tmp_path: Path
) -> None:
    a, _ = pair
    a.ingest(_source(tmp_path, "a-only", b"a-only"), T0)
    damaged = tmp_path / "state" / "c.db"
    header = (tmp_path / "state" / "a.db").read_bytes()[:100]  # a ledger's, then garbage
    damaged.write_bytes(header + b"\xff" * 8000)
    report = run_gc(a, LATER)["report"]
    assert report["unreadableLedgers"] == [str(damaged)]
    assert report["sharedFiles"] == [_digest(b"a-only")] and report["bytes"] == 0
    assert a.blob_path(_digest(b"a-only")).exists()


def test_recovery_restores_a_file_the_other_ledger_left_in_trash(
    pair: tuple[ArtifactStore, ArtifactStore], tmp_path: Path
) -> None:
    a, b = pair
    got = b.ingest(_source(tmp_path, "b-only", b"b-only"), T0)
    blob = b.blob_path(got.digest)
    os.replace(blob, b.trash_dir / blob.name)  # b's collection died after the move
    assert a.recover() == {"restored": 1, "dropped": 0, "staleTmp": 0}
    assert blob.read_bytes() == b"b-only"


def test_a_refused_ingest_keeps_the_file_the_other_ledger_names(
    pair: tuple[ArtifactStore, ArtifactStore], tmp_path: Path
) -> None:
    a, b = pair
    src = _source(tmp_path, "shared", b"shared")
    got = b.ingest(src, T0)
    owner = IngestOwner(None, None, "lease-refused")
    assert a.ingest_metered(src, T0, owner, lambda _conn, _size: False) is None
    assert b.blob_path(got.digest).read_bytes() == b"shared"


def test_with_another_ledger_beside_a_fresh_unnamed_file_waits_out_the_grace(
    pair: tuple[ArtifactStore, ArtifactStore],
) -> None:
    # Another ledger's writer may name a file in a transaction not yet committed (a large value
    # is written so): only committed rows can be read, so a fresh file no ledger names stays.
    a, _ = pair
    fresh = a.blobs_dir / "cd" / ("cd" + "1" * 62)
    old = a.blobs_dir / "cd" / ("cd" + "2" * 62)
    fresh.parent.mkdir()
    fresh.write_bytes(b"being written")
    old.write_bytes(b"left long ago")
    hours_ago = time.time() - 2 * 3600
    os.utime(old, (hours_ago, hours_ago))
    report = run_gc(a, LATER)["report"]
    assert report["untrackedFiles"] == [f"sha256/cd/{old.name}"]
    assert fresh.exists() and not old.exists()
