"""Benchmark: the floors of this machine, measured in the same run as everything else.

- a bare one-row SQLite commit, WAL + ``synchronous=FULL`` (``bench_ledger``'s bare writer);
- a task-completion commit through the ledger API (``bench_ledger``'s ledger writer) — what
  one durable agentctl step costs in SQLite alone, before any scheduling;
- ``write(64 B)`` + ``fsync`` of a file on the same disk;
- a small new file made durable (write, fsync, rename, directory fsync: ``durable_new_file``);
- a coordinator ↔ worker frame round trip: ``WorkerPool.execute`` of an ``Execute`` for an
  operation no worker supports, so the worker answers ``Failure`` with no I/O — two frames,
  two pydantic validations, one socket hop each way;
- the same round trip with the spin before parking off (``frame_round_trip_parked``, ADR 0014):
  what an effect whose peer is not quick pays, and what the effect chains' floors use;
- the same hop with nothing of ours around it (``wire_ping_pong``): one byte sent back and
  forth between two trio processes over a socketpair — what a round trip costs this machine
  in wake-ups alone (on an idle 2-vCPU VM most of it is waking a halted vCPU: a busy machine
  answers faster);
- spawning ``/bin/true`` and waiting for it (the floor under a trivial shell effect);
- the worker's part of a shell effect (``shell_effect_worker``): ``WorkerPool.execute`` of a
  ``builtin.shell.exec`` of ``/bin/true``, no ledger — to compare with round trip + spawn;
- the bare shell chain (``shell_chain_bare``): one commit, one byte to a trio peer that spawns
  ``/bin/true`` and waits for it by pidfd, one byte back — the shell chain's step with none of
  our code, its parts composed with the wake-ups they really cost.

Run: ``python benchmarks/bench_floors.py [--runs 7] [--reps 300] [--json]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_ledger
import benchkit


def commit_floors(workdir: Path, runs: int, reps: int) -> list[benchkit.Figure]:
    bare = bench_ledger._bare(workdir / "bare.db")
    task = bench_ledger._ledger(workdir / "ledger.db", (runs + 1) * reps)
    bench_ledger._measure(bare, 0, min(reps, 20))  # warm-up: table pages, WAL file
    bare_ms, task_ms = [], []
    for rep in range(runs):  # interleaved, so disk drift hits both alike
        bare_ms.append(bench_ledger._measure(bare, (rep + 1) * reps, reps))
        task_ms.append(bench_ledger._measure(task, rep * reps, reps))
    return [
        benchkit.figure("sqlite_commit", "ms/commit", bare_ms),
        benchkit.figure("ledger_task_commit", "ms/commit", task_ms),
    ]


def fsync_floor(workdir: Path, runs: int, reps: int) -> benchkit.Figure:
    path = workdir / "fsync.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        samples = []
        for _ in range(runs):
            t0 = time.perf_counter()
            for _ in range(reps):
                os.write(fd, b"x" * 64)
                os.fsync(fd)
            samples.append((time.perf_counter() - t0) * 1000 / reps)
    finally:
        os.close(fd)
    return benchkit.figure("fsync", "ms/fsync", samples)


def _durable_new_file(folder: Path, i: int) -> None:
    tmp = folder / f"f{i}.part"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, b"x" * 100)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, folder / f"f{i}")
    dfd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def new_file_floor(workdir: Path, runs: int, reps: int) -> benchkit.Figure:
    """A small new file made durable the way a write or an ingestion does it: write, fsync,
    rename into place, fsync the directory (the floor under each file a ``builtin.write``
    step makes durable — the workspace file and its artifact blob)."""
    folder = workdir / "newfiles"
    folder.mkdir()
    for i in range(min(reps, 20)):  # warm-up
        _durable_new_file(folder, -1 - i)
    samples, serial = [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(reps):
            _durable_new_file(folder, serial)
            serial += 1
        samples.append((time.perf_counter() - t0) * 1000 / reps)
    return benchkit.figure("durable_new_file", "ms/file", samples)


def _timed_pool_loop(
    make: Callable[[int], Any], check: Callable[[Any], bool], runs: int, reps: int
) -> list[float]:
    """ms per ``WorkerPool.execute`` of ``make(serial)`` on one warm worker, ``runs`` times."""
    import trio

    from agentctl.coordinator.workerpool import open_worker_pool

    samples: list[float] = []

    async def main() -> None:
        async with open_worker_pool(1) as pool:
            serial = 0

            async def once() -> None:
                nonlocal serial
                serial += 1
                reply = await pool.execute(make(serial))
                if not check(reply):
                    raise RuntimeError(f"unexpected worker reply {reply!r}")

            for _ in range(20):  # warm-up: spawn, imports in the worker
                await once()
            for _ in range(runs):
                t0 = time.perf_counter()
                for _ in range(reps):
                    await once()
                samples.append((time.perf_counter() - t0) * 1000 / reps)

    trio.run(main)
    return samples


def _execute(serial: int, operation: str, request: dict[str, Any]) -> Any:
    from agentctl.mailbox.messages import Execute

    return Execute(
        effect_id=f"e{serial}",
        run_id="r",
        task_id="t",
        attempt=1,
        operation=operation,
        request=request,
        timeout_seconds=30,
    )


def frame_round_trip(runs: int, reps: int) -> benchkit.Figure:
    from agentctl.mailbox.messages import Failure

    def make(serial: int) -> Any:
        return _execute(serial, "bench.noop", {})

    def check(reply: Any) -> bool:
        return isinstance(reply, Failure) and reply.error.type != "WorkerLost"

    samples = _timed_pool_loop(make, check, runs, reps)
    return benchkit.figure("frame_round_trip", "ms/round trip", samples)


def frame_round_trip_parked(runs: int, reps: int) -> benchkit.Figure:
    """The same round trip with the spin before parking off (``AGENTCTL_FRAME_SPIN_US=0``,
    ADR 0014): both sides park and are woken, as for any effect whose peer is not quick —
    the round trip the write and shell chains' floors are composed with (they take no spin)."""
    knob = "AGENTCTL_FRAME_SPIN_US"
    saved = os.environ.get(knob)
    os.environ[knob] = "0"  # read by each channel when made: the pool's and its worker's
    try:
        fig = frame_round_trip(runs, reps)
    finally:
        if saved is None:
            del os.environ[knob]
        else:
            os.environ[knob] = saved
    return benchkit.figure(
        "frame_round_trip_parked", fig.unit, fig.samples, note="no spin (ADR 0014)"
    )


def shell_effect_worker(workdir: Path, runs: int, reps: int) -> benchkit.Figure:
    """The worker's part of a shell effect: ``WorkerPool.execute`` of ``/bin/true`` (frame
    out, request validation, the sandboxed spawn and its supervision, frame back) — no
    ledger. Its floor is one round trip plus one spawn."""
    from agentctl.mailbox.messages import Result

    request = {"workspace": str(workdir), "command": "/bin/true"}

    def make(serial: int) -> Any:
        return _execute(serial, "builtin.shell.exec", request)

    samples = _timed_pool_loop(make, lambda reply: isinstance(reply, Result), runs, reps)
    return benchkit.figure("shell_effect_worker", "ms/effect", samples, note="no ledger")


# The echoing peer of ``wire_ping_pong``: a trio process answering each byte on its socket.
_ECHO = """
import socket, sys, trio
async def echo():
    sock = trio.socket.from_stdlib_socket(socket.socket(fileno=int(sys.argv[1])))
    while data := await sock.recv(64):
        await sock.send(data)
trio.run(echo)
"""


def _with_trio_peer(
    peer_code: str, before: Callable[[int], None], warm: int, runs: int, reps: int
) -> list[float]:
    """ms per step against a trio peer process (``peer_code``, given its socket's descriptor):
    a step is ``before(serial)``, one byte sent, the peer's one-byte answer awaited."""
    import socket

    import trio

    ours, theirs = socket.socketpair()
    peer = subprocess.Popen(
        [sys.executable, "-c", peer_code, str(theirs.fileno())], pass_fds=(theirs.fileno(),)
    )
    theirs.close()
    samples: list[float] = []

    async def main() -> None:
        sock = trio.socket.from_stdlib_socket(ours)
        serial = 0

        async def step() -> None:
            nonlocal serial
            serial += 1
            before(serial)
            await sock.send(b"x")
            if not await sock.recv(64):
                raise RuntimeError("the peer process went away")

        for _ in range(warm):  # warm-up: the peer's imports
            await step()
        for _ in range(runs):
            t0 = time.perf_counter()
            for _ in range(reps):
                await step()
            samples.append((time.perf_counter() - t0) * 1000 / reps)

    try:
        trio.run(main)
    finally:
        ours.close()
        peer.wait(timeout=30)
    return samples


def wire_ping_pong(runs: int, reps: int) -> benchkit.Figure:
    """ms per one-byte round trip between this trio process and an echoing one."""
    samples = _with_trio_peer(_ECHO, lambda _serial: None, 200, runs, reps)
    return benchkit.figure("wire_ping_pong", "ms/round trip", samples, note="bare trio")


# The bare shell chain's worker: on each byte, spawn ``/bin/true``, wait for it by pidfd (as
# ``sandbox/spawn.py`` does), reap it and answer — nothing else.
_SPAWNING_PEER = """
import os, socket, subprocess, sys, trio
async def serve():
    sock = trio.socket.from_stdlib_socket(socket.socket(fileno=int(sys.argv[1])))
    while await sock.recv(64):
        child = subprocess.Popen(["/bin/true"], stdin=subprocess.DEVNULL)
        fd = os.pidfd_open(child.pid)
        await trio.lowlevel.wait_readable(fd)
        child.wait()
        trio.lowlevel.notify_closing(fd)
        os.close(fd)
        await sock.send(b"k")
trio.run(serve)
"""


def shell_chain_bare(workdir: Path, runs: int, reps: int) -> benchkit.Figure:
    """ms per step of the smallest durable shell chain this machine can run: a trio process
    commits one row (WAL, ``synchronous=FULL``), sends a byte to a trio peer, which spawns
    ``/bin/true``, waits for it by pidfd and answers. One commit, one round trip and one
    spawn composed with their real wake-ups (each side parks while the other works), and no
    code of ours: what the shell chain would cost if agentctl's own work took no time."""
    commit = bench_ledger._bare(workdir / "bare-shell.db")
    samples = _with_trio_peer(_SPAWNING_PEER, commit, 20, runs, reps)
    return benchkit.figure("shell_chain_bare", "ms/step", samples, note="no agentctl code")


def spawn_floor(runs: int, reps: int) -> benchkit.Figure:
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(reps):
            subprocess.run(["/bin/true"], check=True, stdin=subprocess.DEVNULL)
        samples.append((time.perf_counter() - t0) * 1000 / reps)
    return benchkit.figure("spawn_true", "ms/process", samples)


def main(runs: int = 7, reps: int = 300, workdir: Path | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        figures = commit_floors(Path(tmp), runs, reps)
        figures.append(fsync_floor(Path(tmp), runs, reps))
        figures.append(new_file_floor(Path(tmp), runs, reps))
        figures.append(frame_round_trip(runs, reps))
        figures.append(frame_round_trip_parked(runs, reps))
        figures.append(wire_ping_pong(runs, reps))
        figures.append(spawn_floor(runs, max(1, reps // 5)))
        figures.append(shell_effect_worker(Path(tmp), runs, max(1, reps // 5)))
        figures.append(shell_chain_bare(Path(tmp), runs, max(1, reps // 5)))
    return {"benchmark": "floors", "figures": [f.to_json() for f in figures]}


def _cli() -> None:
    benchkit.run_as_installed()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--json", action="store_true", help="one BENCH-JSON line for run_all")
    args = parser.parse_args()
    result = main(args.runs, args.reps, args.dir)
    if args.json:
        benchkit.emit(result)
        return
    for f in result["figures"]:
        spread = f"min {f['min']:.4f}  median {f['median']:.4f}  max {f['max']:.4f}"
        print(f"{f['name']:20s} {spread} {f['unit']}")


if __name__ == "__main__":
    _cli()
