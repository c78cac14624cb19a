"""The on-disk content-addressed store: ingest, verify, export, and recovery at open.

Layout under ``<db dir>/artifacts/`` (0700): ``sha256/<2hex>/<64hex>`` blobs (0400),
``tmp/`` partial writes, ``trash/`` GC quarantine, ``.lock`` (0600, cross-process lock).

Invariants:
- a blob file under ``sha256/`` only ever appears complete: bytes are hashed into ``tmp/``,
  fsynced, made read-only and then hard-linked into place (no clobber), and its directory is
  fsynced (two fsyncs per new blob; ``tmp/`` is never fsynced: recovery empties it); an
  existing blob is re-verified instead of trusted (a file whose bytes an intact blob already
  holds is not copied at all);
- the blob row is written only after its file is in place, so every row names real bytes; a
  meter (the run's ``artifactBytes`` budget) decides in that same transaction, and bytes it
  refused that no row names are removed again;
  an ingestion lease (60 min) protects the blob from GC until the task's completion commits
  its references (``refs.commit_artifact_refs_txn``); a blob still stored is leased again
  (``lease_stored``) under the lock GC holds, so it cannot go between the check and the lease;
- ingest, verify, export, GC and recovery all hold the ``.lock``, exclusive between processes
  (``flock.ProcessLock``); the threads of one process share it, and only ingestions run side by
  side in one (unique ``tmp/`` names, no-clobber links): recovery runs when the store opens,
  before its first ingestion, and GC in its own command. So under the lock anything in
  ``tmp/`` or ``trash/`` is left over from a crashed process.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.crashpoints import CrashPoint, crash_point
from agentctl.errors import (
    InvalidOperationError,
    NotFoundError,
    PersistenceError,
    ValidationError,
)
from agentctl.ledger.artifacts.destination import refuse_ledger_state
from agentctl.ledger.artifacts.refs import ArtifactRef, get_blob, list_blobs, record_ingest_txn
from agentctl.ledger.artifacts.siblings import SiblingBlobs, sibling_blobs
from agentctl.ledger.flock import ProcessLock
from agentctl.ledger.rows import shift_ts
from agentctl.ledger.runner import Transactions
from agentctl.ledger.sql import Db

MAX_INGEST_BYTES = 16 * 1024 * 1024
# From this size on, ledger values are kept as blobs (``values.py``) and a file is hashed
# before it is copied, in case a blob already holds it.
LARGE_BLOB_BYTES = 64 * 1024
LEASE_SECONDS = 3600
LOCK_TIMEOUT_S = 30.0
_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class IngestOwner:
    """Who an ingestion's lease is for."""

    run_id: str | None
    task_id: str | None
    lease_id: str


# Decides, inside the blob row's transaction, whether ``size`` bytes may be stored.
Meter = Callable[[Db, int], bool]


@dataclass(frozen=True)
class IngestResult:
    """A file ingested into the store: its digest, its size and the lease that holds it."""

    digest: str
    size_bytes: int
    lease_id: str

    def ref(self, logical_path: str, media_type: str | None = None) -> ArtifactRef:
        return ArtifactRef(logical_path, self.digest, self.size_bytes, media_type)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# The shortest digest prefix taken for a whole one: what ``artifacts list`` shows.
MIN_DIGEST_PREFIX = 12


def digest_ref_of(ref: str) -> str:
    """``ref`` checked as a whole digest or as ``sha256:`` and a prefix of at least
    ``MIN_DIGEST_PREFIX`` of its hex digits; anything else is bad input (exit 2)."""
    _checked_hex(
        ref, MIN_DIGEST_PREFIX, f", or a unique prefix of at least {MIN_DIGEST_PREFIX} of them"
    )
    return ref


def hex_of(digest: str) -> str:
    """The hex part of an artifact digest; anything not ``sha256:<64 lowercase hex>`` is bad
    input (exit 2), never a blob that could not be found."""
    return _checked_hex(digest, 64, "")


def _checked_hex(ref: str, shortest: int, also: str) -> str:
    """``ref``'s hex after ``sha256:``, ``shortest``..64 lowercase digits, else bad input."""
    prefix, _, hexd = ref.partition(":")
    if (
        prefix != "sha256"
        or not shortest <= len(hexd) <= 64
        or any(c not in "0123456789abcdef" for c in hexd)
    ):
        raise ValidationError(
            f"not an artifact digest: {ref!r} (want sha256:<64 lowercase hex>{also})"
        )
    return hexd


def blob_file(root: Path, digest: str) -> Path:
    """Where the blob ``digest`` lives in the store rooted at ``root``."""
    hexd = hex_of(digest)
    return root / "sha256" / hexd[:2] / hexd


def blob_problem(path: Path, digest: str, size_bytes: int) -> str | None:
    """Why the blob file at ``path`` does not hold ``digest`` (None when it does)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "blob file is missing"
    if not stat.S_ISREG(st.st_mode):
        return "blob is not a regular file"
    if st.st_size != size_bytes:
        return f"size {st.st_size} differs from recorded {size_bytes}"
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    if "sha256:" + h.hexdigest() != digest:
        return "content does not match its digest"
    return None


class ArtifactStore:
    """The CAS beside one ledger; methods take the cross-process lock themselves."""

    def __init__(self, ledger: Transactions) -> None:
        self.ledger = ledger
        self.root = ledger.artifacts_root
        self.blobs_dir = self.root / "sha256"
        self.tmp_dir = self.root / "tmp"
        self.trash_dir = self.root / "trash"
        for d in (self.root, self.blobs_dir, self.tmp_dir, self.trash_dir):
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(d, 0o700)
        lock_path = self.root / ".lock"
        self._lock = ProcessLock(lock_path, LOCK_TIMEOUT_S, self._lock_busy)
        with self.locked():  # creates the lock file (0600) before anything needs it
            pass

    def locked(self) -> contextlib.AbstractContextManager[None]:
        """Hold the store's cross-process lock for the block (``flock.ProcessLock``: this
        process's threads share the hold; ingestions need no order among themselves)."""
        return self._lock.held()

    def _lock_busy(self) -> str:
        return f"the artifact store lock {self.root / '.lock'} stayed busy for {LOCK_TIMEOUT_S:g} s"

    def blob_path(self, digest: str) -> Path:
        return blob_file(self.root, digest)

    def siblings(self) -> SiblingBlobs:
        """What the other ledgers sharing this store name: their blob files are not ours to
        remove (``siblings.py``)."""
        return sibling_blobs(self.root, self.ledger.database_file)

    # --- ingest ------------------------------------------------------------------------

    def ingest(
        self,
        source: str | os.PathLike[str],
        now: str,
        *,
        run_id: str | None = None,
        task_id: str | None = None,
        lease_id: str | None = None,
    ) -> IngestResult:
        """Copy a regular file into the store and lease its blob until completion commits."""
        lease = lease_id or f"ingest-{uuid.uuid4()}"
        got = self.ingest_metered(source, now, IngestOwner(run_id, task_id, lease), None)
        assert got is not None, "only a meter refuses"
        return got

    def ingest_metered(
        self,
        source: str | os.PathLike[str],
        now: str,
        owner: IngestOwner,
        meter: Meter | None,
        expect: str | None = None,
    ) -> IngestResult | None:
        """``ingest``, with ``meter`` (e.g. the run's ``artifactBytes`` budget) deciding in the
        same transaction as the blob row; None when it refused (what it wrote still commits,
        and bytes no row names are dropped again). ``expect``: the digest the file must hold,
        else ``InvalidOperationError`` before anything is stored."""
        src = Path(source)
        with self.locked():
            known = self._already_stored(src)
            if known is not None:
                digest, size = known
                _refuse_other(src, digest, expect)
            else:
                tmp, digest, size = self._write_tmp(src)
                crash_point(CrashPoint.ARTIFACT_AFTER_TMP_WRITE)
                if expect not in (None, digest):
                    tmp.unlink(missing_ok=True)
                    _refuse_other(src, digest, expect)
                self._publish(tmp, digest, size)
                crash_point(CrashPoint.ARTIFACT_AFTER_RENAME)
            return self._lease(digest, size, now, owner, meter, copied=known is None)

    def lease_stored(
        self, digest: str, now: str, owner: IngestOwner, meter: Meter | None
    ) -> IngestResult | None:
        """The blob ``digest``, when the store still holds it intact, leased (and metered) as
        an ingestion of its bytes is; None when it holds no such blob or ``meter`` refused."""
        path = self.blob_path(digest)
        with self.locked():
            try:
                size = os.lstat(path).st_size
            except FileNotFoundError:
                return None
            if blob_problem(path, digest, size) is not None:
                return None
            return self._lease(digest, size, now, owner, meter, copied=False)

    def _lease(
        self,
        digest: str,
        size: int,
        now: str,
        owner: IngestOwner,
        meter: Meter | None,
        *,
        copied: bool,
    ) -> IngestResult | None:
        """The blob row and ``owner``'s lease (the lock held, the file in place), ``meter``
        deciding in the same transaction; ``copied``: this ingestion put the file there."""
        expires = shift_ts(now, LEASE_SECONDS)

        def txn(conn: Db) -> tuple[bool, bool]:  # may run again: a backend's retry
            granted = meter is None or meter(conn, size)
            if granted:
                run, task = owner.run_id, owner.task_id
                record_ingest_txn(
                    conn, digest, size, owner.lease_id, expires, now, run_id=run, task_id=task
                )
            return granted, not granted and get_blob(conn, digest) is None

        granted, unnamed = self.ledger.run_write(txn)
        # Only bytes this ingest put there, and no other ledger names: a file found in
        # place may be another ledger's, committed or about to be.
        if unnamed and copied and not self.siblings().names(digest):
            self.blob_path(digest).unlink(missing_ok=True)
        if not granted:
            return None
        crash_point(CrashPoint.ARTIFACT_AFTER_BLOB_ROW)
        return IngestResult(digest, size, owner.lease_id)

    def _open_source(self, src: Path) -> int:
        try:
            fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as exc:
            raise InvalidOperationError(
                f"cannot ingest {src}: only existing regular files (never symlinks) are stored"
            ) from exc
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_INGEST_BYTES:
            os.close(fd)
            raise InvalidOperationError(
                f"cannot ingest {src}: only regular files up to {MAX_INGEST_BYTES} bytes are stored"
            )
        return fd

    def _already_stored(self, src: Path) -> tuple[str, int] | None:
        """(digest, size) of ``src`` when an intact blob already holds exactly its bytes.

        A large file a ``builtin.write`` wrote usually is: its content was stored as a ledger
        value (``values.py``) when the effect was recorded. Then nothing is copied (no second
        copy, not even in ``tmp/``). Small files are never ledger values: they are just copied.
        """
        with os.fdopen(self._open_source(src), "rb") as fin:
            if os.fstat(fin.fileno()).st_size < LARGE_BLOB_BYTES:
                return None  # cheaper to copy than to read twice
            h, size = hashlib.sha256(), 0
            while chunk := fin.read(_CHUNK):
                h.update(chunk)
                size += len(chunk)
        digest = "sha256:" + h.hexdigest()
        intact = blob_problem(self.blob_path(digest), digest, size) is None
        return (digest, size) if intact else None

    def _write_tmp(self, src: Path) -> tuple[Path, str, int]:
        """Stream ``src`` into ``tmp/`` while hashing; fsynced before returning."""
        fd = self._open_source(src)
        tmp = self.tmp_dir / f"{uuid.uuid4().hex}.part"
        h, size = hashlib.sha256(), 0
        try:
            with os.fdopen(fd, "rb") as fin, tmp.open("xb") as fout:
                while chunk := fin.read(_CHUNK):
                    size += len(chunk)
                    if size > MAX_INGEST_BYTES:
                        raise InvalidOperationError(f"{src} grew beyond {MAX_INGEST_BYTES} bytes")
                    h.update(chunk)
                    fout.write(chunk)
                fout.flush()
                os.fsync(fout.fileno())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return tmp, "sha256:" + h.hexdigest(), size

    def _publish(self, tmp: Path, digest: str, size: int) -> None:
        """Hard-link the verified temp file into place (no clobber) and drop the temp name.

        One directory fsync: the blob's own entry, before any row can name it. The temp name's
        removal need not be durable (recovery clears ``tmp/`` under the lock at open), so
        ``tmp/`` is not fsynced; a new fan-out directory's entry is, the one time it appears.
        """
        dest = self.blob_path(digest)
        if not dest.parent.is_dir():
            dest.parent.mkdir(mode=0o700, exist_ok=True)
            fsync_dir(self.blobs_dir)
        os.chmod(tmp, 0o400)
        try:
            os.link(tmp, dest)
        except FileExistsError:
            if blob_problem(dest, digest, size) is not None:
                os.replace(tmp, dest)  # a corrupt copy is replaced by the good bytes
        tmp.unlink(missing_ok=True)
        fsync_dir(dest.parent)

    # --- verify and export -------------------------------------------------------------

    def verify(self, now: str, digests: Sequence[str] | None = None) -> JsonObject:
        """Check blobs (all when ``digests`` is None); any failure raises PersistenceError
        carrying the whole report as its ``data`` (the envelope's ``error.details``, as
        docs/cli.md says): every failed blob, not only the one its message names."""
        with self.locked():
            with self.ledger.read() as conn:
                blobs = list_blobs(conn, digests)
            missing = sorted(set(digests or ()) - {b.digest for b in blobs})
            if missing:
                raise NotFoundError(f"artifact {missing[0]} not found")
            results: list[JsonObject] = []
            for b in blobs:
                problem = blob_problem(self.blob_path(b.digest), b.digest, b.size_bytes)
                entry: JsonObject = {"digest": b.digest, "sizeBytes": b.size_bytes}
                results.append({**entry, "valid": problem is None, "detail": problem})
            good = [(now, str(r["digest"])) for r in results if r["valid"]]
            with self.ledger.transaction() as conn:
                conn.executemany(
                    "UPDATE artifact_blobs SET last_verified_at = ? WHERE digest = ?", good
                )
        checked = list[JsonValue](results)
        report: JsonObject = {"valid": len(good) == len(results), "artifacts": checked}
        bad = [r for r in results if not r["valid"]]
        if bad:
            raise PersistenceError(
                f"artifact {bad[0]['digest']} failed verification: {bad[0]['detail']}",
                data=report,
            )
        return report

    def export(
        self, digest: str, destination: str | os.PathLike[str], *, overwrite: bool = False
    ) -> JsonObject:
        """Write a verified blob's bytes to ``destination`` atomically; never onto the
        ledger's own database or into this store (``destination.py``)."""
        dest = Path(destination)
        refuse_ledger_state(dest, self.ledger.database_file, self.root)
        with self.locked():
            with self.ledger.read() as conn:
                blob = get_blob(conn, digest)
            if blob is None:
                raise NotFoundError(f"artifact {digest} not found")
            src = self.blob_path(digest)
            problem = blob_problem(src, digest, blob.size_bytes)
            if problem is not None:
                raise PersistenceError(f"artifact {digest} failed verification: {problem}")
            if dest.is_symlink():
                raise PersistenceError(f"refusing to export onto the symlink {dest}")
            # Before the --overwrite advice: a directory or device is refused with it too.
            _refuse_special(dest)
            if dest.exists() and not overwrite:
                raise PersistenceError(f"{dest} exists; pass --overwrite to replace it")
            try:
                self._copy_atomically(src, dest)
            except OSError as exc:
                raise PersistenceError(f"cannot export to {dest}: {exc.strerror}") from exc
        return {"digest": digest, "destination": str(dest), "bytes": blob.size_bytes}

    def _copy_atomically(self, src: Path, dest: Path) -> None:
        parent = dest.parent if str(dest.parent) else Path(".")
        # Missing directories of the destination are made, as the original does (`export D
        # exports/report.txt` in a fresh checkout); a file in the way is still an error.
        parent.mkdir(parents=True, exist_ok=True)
        tmp = parent / f".{dest.name}.{uuid.uuid4().hex}.tmp"
        try:
            with src.open("rb") as fin, tmp.open("xb") as fout:
                while chunk := fin.read(_CHUNK):
                    fout.write(chunk)
                fout.flush()
                os.fsync(fout.fileno())
            os.replace(tmp, dest)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        fsync_dir(parent)

    # --- recovery ----------------------------------------------------------------------

    def recover(self, *, clear_tmp: bool = True) -> dict[str, int]:
        """Finish what a crashed GC or ingest left: restore or drop trash, clear tmp."""
        restored = dropped = 0
        with self.locked():
            with self.ledger.read() as conn:
                tracked = {b.digest for b in list_blobs(conn)}
            trash = sorted(self.trash_dir.iterdir())
            if any("sha256:" + e.name not in tracked for e in trash):
                tracked |= self.siblings().keeping(e.name for e in trash)
            for entry in trash:
                digest = "sha256:" + entry.name
                if digest in tracked and not self.blob_path(digest).exists():
                    self.blob_path(digest).parent.mkdir(mode=0o700, exist_ok=True)
                    os.replace(entry, self.blob_path(digest))
                    restored += 1
                else:
                    entry.unlink()
                    dropped += 1
            stale = clear_dir(self.tmp_dir) if clear_tmp else 0
            fsync_dir(self.trash_dir)
        return {"restored": restored, "dropped": dropped, "staleTmp": stale}


def _refuse_other(src: Path, digest: str, expect: str | None) -> None:
    """Refuse a file that no longer holds the bytes ``expect`` names (None: any bytes)."""
    if expect not in (None, digest):
        raise InvalidOperationError(f"{src} no longer holds the bytes written there")


def _refuse_special(dest: Path) -> None:
    """Refuse a destination that exists and is not a regular file: ``--overwrite`` replaces a
    file. Renaming over a device, FIFO or socket would replace the node itself (as root,
    ``/dev/null`` would become a regular file for every process on the host)."""
    try:
        mode = dest.lstat().st_mode
    except FileNotFoundError:
        return
    if stat.S_ISREG(mode):
        return
    kind = "a directory" if stat.S_ISDIR(mode) else "a device, FIFO or socket"
    raise PersistenceError(
        f"refusing to export onto {dest}: it is {kind}, not a regular file "
        "(--overwrite replaces only a file); it was left unchanged"
    )


def clear_dir(path: Path) -> int:
    count = 0
    for entry in path.iterdir():
        entry.unlink()
        count += 1
    return count


def open_artifact_store(
    ledger: Transactions, *, recover: bool = True, clear_tmp: bool = True
) -> ArtifactStore:
    """Open (creating) the store of ``ledger`` and recover anything a crash left. GC opens it
    keeping ``tmp/`` (it reports what it removes there), a GC dry run without any recovery."""
    try:
        store = ArtifactStore(ledger)
        if recover:
            store.recover(clear_tmp=clear_tmp)
    except OSError as exc:
        raise PersistenceError(f"artifact store {ledger.artifacts_root}: {exc}") from exc
    return store
