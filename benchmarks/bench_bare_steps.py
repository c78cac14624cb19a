"""Benchmark: two effect steps' own durable work, with none of agentctl's Python around it.

The goals of issue 15 compare a step with a bare one-row commit; these floors say what the
step's *own* durable work costs this machine when nothing else runs, measured the way the
step really does it (``shell_chain_bare`` in ``bench_floors`` does the same for a shell step):

- ``memory_step_sql_replay``: every SQL statement a ``builtin.memory.write`` chain runs (its
  rows, audit events, checkpoint, ``BEGIN IMMEDIATE``/``COMMIT``), recorded with its bound
  parameters from a real in-process run and replayed in the same order, on the same
  connections, by Python's ``sqlite3`` alone into a fresh ledger file: SQLite's share of a
  step (its statement cache as the ledger's, every row fetched) and the commit's fsync.
  Per step: the middle half of the chain (from one step's commit to another's; a step
  commits once) timed, so the run's creation and end are left out.
- ``write_chain_bare``: a ``builtin.write`` step's durable I/O in its order, in two trio
  processes: a one-row commit (the effect started), one byte to a peer that writes the
  workspace file as the worker does (temporary file, write, fsync, rename, directory fsync)
  and answers, then the file hashed and copied into a content-addressed blob as ingestion
  does (temporary file, write, fsync, hard link into ``sha256/xx/``, directory fsync) and a
  second one-row commit (the blob row). Two commits, one round trip, two durable new files,
  composed with their real wake-ups and interleaving.

Run: ``python benchmarks/bench_bare_steps.py [--n 500] [--runs 5] [--json]``.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_floors
import bench_ledger
import benchkit

# One recorded statement: (connection number, "one" or "many", SQL, parameters).
Statement = tuple[int, str, str, Any]


def _record(n: int, out: Path, workdir: Path) -> None:
    """Run an ``n``-step memory.write chain in this process and pickle its statements."""
    from agentctl.ledger import crypto
    from agentctl.ledger.connection import open_database

    db = workdir / "runtime.db"
    open_database(db).close()  # a fresh ledger: the replay starts from a copy of it
    shutil.copy(db, workdir / "fresh.db")
    numbers: dict[int, int] = {}
    recorded: list[Statement] = []
    plain_execute = crypto.LedgerConnection.execute
    plain_many = crypto.LedgerConnection.executemany

    def execute(self: Any, sql: str, parameters: Any = (), /) -> Any:
        params = dict(parameters) if isinstance(parameters, dict) else tuple(parameters)
        recorded.append((numbers.setdefault(id(self), len(numbers)), "one", sql, params))
        return plain_execute(self, sql, parameters)

    def executemany(self: Any, sql: str, seq: Any, /) -> Any:
        rows = [dict(p) if isinstance(p, dict) else tuple(p) for p in seq]
        recorded.append((numbers.setdefault(id(self), len(numbers)), "many", sql, rows))
        return plain_many(self, sql, rows)

    crypto.LedgerConnection.execute = execute  # type: ignore[method-assign]  # bench only
    crypto.LedgerConnection.executemany = executemany  # type: ignore[method-assign]
    timed = benchkit.run_inprocess(benchkit.memory_chain(n), workdir)
    if timed.state != "succeeded":
        raise RuntimeError(f"the recorded chain ended {timed.state}")
    out.write_bytes(pickle.dumps(recorded))


def _recording(n: int, workdir: Path) -> list[Statement]:
    """The statements of an ``n``-step chain, recorded in a fresh process."""
    here = workdir / f"rec{n}"
    here.mkdir()
    out = here / "statements.pickle"
    subprocess.run(
        [sys.executable, __file__, "--record", str(n), str(out), str(here)],
        check=True,
        env=os.environ,
    )
    statements: list[Statement] = pickle.loads(out.read_bytes())
    (workdir / f"fresh{n}.db").write_bytes((here / "fresh.db").read_bytes())
    return statements


def _commits(statements: list[Statement]) -> list[int]:
    """The index of every ``COMMIT`` statement (a memory.write step commits once)."""
    return [i for i, (_n, _how, sql, _p) in enumerate(statements) if sql.strip() == "COMMIT"]


def _replay(statements: list[Statement], fresh: Path, target: Path, lo: int, hi: int) -> float:
    """Seconds the statements ``[lo, hi)`` take, replayed in order (all of them, each on its
    recorded connection) against a copy of ``fresh``: the run's creation before ``lo`` and
    its end after ``hi`` are replayed untimed."""
    shutil.copy(fresh, target)
    conns: dict[int, sqlite3.Connection] = {}
    elapsed = 0.0
    for index, (number, how, sql, params) in enumerate(statements):
        if index == lo:
            t0 = time.perf_counter()
        conn = conns.get(number)
        if conn is None:
            conn = conns[number] = sqlite3.connect(target, isolation_level=None)
            conn.row_factory = sqlite3.Row
        try:
            if how == "one":
                conn.execute(sql, params).fetchall()
            else:
                conn.executemany(sql, params)
        except sqlite3.Error:
            pass  # a statement the run expected to fail (a guard) fails here too
        if index == hi - 1:
            elapsed = time.perf_counter() - t0
    for conn in conns.values():
        conn.close()
    return elapsed


def memory_step_sql_replay(workdir: Path, n: int, runs: int) -> benchkit.Figure:
    """ms per step of the middle half of an ``n``-step chain's statements, replayed: from the
    commit of step n/4 to that of step 3n/4, so the run's start and end are left out."""
    statements = _recording(n, workdir)
    commits = _commits(statements)
    first, last = len(commits) // 4, 3 * len(commits) // 4
    lo, hi, steps = commits[first] + 1, commits[last] + 1, last - first
    samples = [
        _replay(statements, workdir / f"fresh{n}.db", workdir / f"replay{rep}.db", lo, hi)
        * 1000
        / steps
        for rep in range(runs)
    ]
    note = f"the step's own SQL, no agentctl code: {(hi - lo) / steps:.1f} statement calls a step"
    return benchkit.figure("memory_step_sql_replay", "ms/step", samples, note=note)


# The bare write chain's worker: on each byte, write the next workspace file as
# ``workers/executors/files.py`` does — temporary file, write, fsync, rename, directory fsync.
_WRITING_PEER = """
import os, socket, sys, tempfile, trio
folder = sys.argv[2]
async def serve():
    sock = trio.socket.from_stdlib_socket(socket.socket(fileno=int(sys.argv[1])))
    serial = 0
    while await sock.recv(64):
        serial += 1
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".w-", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(b"v%d" % serial)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, os.path.join(folder, "f%d.txt" % serial))
        dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(dfd)
        os.close(dfd)
        await sock.send(b"k")
trio.run(serve)
"""


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _ingest(source: Path, store: Path) -> None:
    """Hash ``source`` and make it a durable blob under ``store/sha256/xx/``."""
    data = source.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    folder = store / "sha256" / digest[:2]
    if not folder.is_dir():
        folder.mkdir(parents=True)
        _fsync_dir(folder.parent)
    tmp = store / "tmp" / f"{digest}.part"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.link(tmp, folder / digest)
    tmp.unlink()
    _fsync_dir(folder)


def write_chain_bare(workdir: Path, runs: int, reps: int) -> benchkit.Figure:
    out, store = workdir / "bare-write-out", workdir / "bare-write-store"
    for folder in (out, store / "tmp"):
        folder.mkdir(parents=True)
    commit = bench_ledger._bare(workdir / "bare-write.db")

    def before(serial: int) -> None:
        if serial > 1:  # the previous step's file, ingested, and its blob row committed
            _ingest(out / f"f{serial - 1}.txt", store)
            commit(2 * serial - 1)
        commit(2 * serial)  # this step's effect, started

    peer = _WRITING_PEER.replace("sys.argv[2]", repr(str(out)))
    samples = bench_floors._with_trio_peer(peer, before, 20, runs, reps)
    note = "2 commits + 1 round trip + 2 durable new files, no agentctl code"
    return benchkit.figure("write_chain_bare", "ms/step", samples, note=note)


def main(n: int = 500, runs: int = 5, workdir: Path | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        figures = [
            memory_step_sql_replay(Path(tmp), n, runs),
            write_chain_bare(Path(tmp), runs, n),
        ]
    return {"benchmark": "bare_steps", "figures": [f.to_json() for f in figures]}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--record"]:
        _record(int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
    else:
        benchkit.module_cli(__doc__, main, {"n": 500, "runs": 5})
