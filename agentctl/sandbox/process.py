"""Bounded host subprocesses: argv only, cleared env, own process group, capped capture.

Invariants:
- the child gets exactly the ``env`` the caller passes and no shell; it leads a new process
  group (in the caller's session), so the whole tree can be signalled at once;
- stdout and stderr are drained concurrently (one task, parked on an epoll set of both pipes
  and the child's pidfd, where pidfd exists); we never hold more than the per-stream limits,
  whatever the child prints; on overflow the tree is killed and the captured bytes dropped;
- on timeout, overflow, memory/CPU limit or cancellation the whole tree (process group plus
  every psutil descendant, which may have left the group) is SIGKILLed and the child reaped
  before we return or re-raise — nothing we started outlives the call;
- after a normal exit, leftovers in the process group are killed too, so a background
  grandchild holding our pipes cannot stall the effect; after a limit is hit and the leader
  is gone, the pipes are no longer read (one held open by a process that left the group
  cannot turn the overflow into a timeout);
- stdin is empty unless the caller passes bytes, which are written concurrently with the
  draining (a child that never reads them cannot deadlock us) and then closed;
- our descriptors for the child (pipe ends, pidfd, the epoll set watching them) are closed
  before we return — unless the caller passes ``defer`` and the child ran to its end (reaped,
  its group killed): then each set of them goes to ``defer`` as a closer the caller must call,
  so that its answer goes out first (closing them is ~15 µs of system calls on that path).
This is containment of our own children, not a security sandbox (spec/cli.md §10).
"""

from __future__ import annotations

import contextlib
import functools
import os
import select
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import trio

from agentctl.core.timeouts import seconds_text
from agentctl.errors import RunFailedError
from agentctl.sandbox.spawn import Child, spawn_child

Outcome = Literal["exited", "timed_out", "output_limit", "memory_limit", "cpu_limit"]
WATCH_INTERVAL_S = 0.05
_CHUNK = 64 * 1024
_EXIT_GRACE_S = 0.001  # see _pump
# Takes a closer of descriptors the caller closes later (``run_process``'s ``defer``).
Defer = Callable[[Callable[[], None]], None]


@dataclass(frozen=True)
class ProcessResult:
    """How a spawned process ended and what it wrote, within the limits."""

    outcome: Outcome
    exit_code: int | None  # None unless outcome == "exited"
    stdout: bytes
    stderr: bytes
    detail: str = ""  # which limit was hit, without any captured bytes

    @property
    def ok(self) -> bool:
        return self.outcome == "exited" and self.exit_code == 0


@dataclass(frozen=True)
class Limits:
    """The output caps and resource limits a spawned process runs under."""

    stdout: int
    stderr: int
    combined: int
    memory_bytes: int | None
    cpu_s: float | None


class _Capture:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.buffers = {"stdout": bytearray(), "stderr": bytearray()}
        self.stopped: tuple[Outcome, str] | None = None

    def add(self, stream: str, chunk: bytes | bytearray) -> bool:
        """Keep ``chunk``; False once a limit is exceeded (the chunk is then dropped)."""
        buf = self.buffers[stream]
        limit = self.limits.stdout if stream == "stdout" else self.limits.stderr
        total = len(self.buffers["stdout"]) + len(self.buffers["stderr"]) + len(chunk)
        if len(buf) + len(chunk) > limit:
            self.stop("output_limit", f"{stream} exceeded its limit of {limit} bytes")
            return False
        if total > self.limits.combined:
            self.stop(
                "output_limit",
                f"output exceeded the combined limit of {self.limits.combined} bytes",
            )
            return False
        buf += chunk
        return True

    def stop(self, outcome: Outcome, detail: str) -> None:
        if self.stopped is None:
            self.stopped = (outcome, detail)


def kill_tree(pid: int) -> None:
    """SIGKILL the process group led by ``pid`` and every descendant of ``pid``; never raises."""
    # psutil is imported where it is needed (a limit hit, a timeout, a cancel): a worker whose
    # processes exit normally never imports it, which shortens every worker's start-up.
    import psutil

    try:
        descendants = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        descendants = []
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    for child in descendants:
        with contextlib.suppress(psutil.Error):
            child.kill()


async def _drain(stream: trio.abc.ReceiveStream, name: str, cap: _Capture, pid: int) -> None:
    while True:
        chunk = await stream.receive_some(_CHUNK)
        if not chunk:
            return
        _take(cap, name, chunk, pid)


def _take(cap: _Capture, name: str, chunk: bytes | bytearray, pid: int) -> None:
    if cap.stopped is None and not cap.add(name, chunk):
        kill_tree(pid)
        # The caller keeps reading to EOF, so the child never blocks on a full pipe before
        # it dies.


def _tree_usage(pid: int) -> tuple[int, float]:
    import psutil  # see kill_tree

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0, 0.0
    rss, cpu = 0, 0.0
    for proc in procs:
        try:
            rss += proc.memory_info().rss
            times = proc.cpu_times()
            cpu += times.user + times.system + times.children_user + times.children_system
        except psutil.Error:
            continue
    return rss, cpu


async def _watch(pid: int, cap: _Capture) -> None:
    limits = cap.limits
    while cap.stopped is None:
        rss, cpu = _tree_usage(pid)
        if limits.memory_bytes is not None and rss > limits.memory_bytes:
            cap.stop("memory_limit", f"memory use exceeded {limits.memory_bytes} bytes")
        elif limits.cpu_s is not None and cpu > limits.cpu_s:
            cap.stop("cpu_limit", f"CPU time exceeded {limits.cpu_s} s")
        else:
            await trio.sleep(WATCH_INTERVAL_S)
            continue
        kill_tree(pid)
        return


async def _feed(stream: trio.abc.SendStream, data: bytes) -> None:
    """Write ``data`` to the child's stdin, then close it; a child that exits first is fine."""
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        async with stream:
            await stream.send_all(data)


async def _supervise(proc: Child, cap: _Capture, stdin: bytes | None, defer: Defer | None) -> None:
    watching = cap.limits.memory_bytes is not None or cap.limits.cpu_s is not None
    exit_fd = proc.exit_fd()
    if exit_fd is not None and stdin is None and not watching:
        # The common case needs no task: one loop drains both pipes and sees the exit.
        await _pump(proc, cap, exit_fd, defer)
        return
    async with trio.open_nursery() as nursery:
        if stdin is not None and proc.stdin is not None:
            nursery.start_soon(_feed, proc.stdin, stdin)
        watcher = trio.CancelScope()
        if watching:

            async def watch() -> None:
                with watcher:
                    await _watch(proc.pid, cap)

            nursery.start_soon(watch)
        if exit_fd is not None:
            await _pump(proc, cap, exit_fd, None)
        else:
            nursery.start_soon(_drain, proc.stdout, "stdout", cap, proc.pid)
            nursery.start_soon(_drain, proc.stderr, "stderr", cap, proc.pid)
            await proc.wait_exited()
            _end_group(proc)
        watcher.cancel()


def _end_group(proc: Child, *, keep_exit_fd: bool = False) -> None:
    """After the leader's exit: kill what is left of its group, then collect its status."""
    # The leader is not reaped yet, so its group id is still ours (not recycled): killing
    # the group's leftovers lets the pipes reach EOF.
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.reap(keep_exit_fd=keep_exit_fd)


async def _pump(proc: Child, cap: _Capture, exit_fd: int, defer: Defer | None) -> None:
    """Drain stdout and stderr and see the leader exit, in this one task.

    The pipes and the exit descriptor (pidfd) sit in one private epoll set, and the task parks
    on that set's descriptor (readable when any member is): one wake-up serves whichever is
    ready, where a task per pipe plus a wait would cost a scheduler pass each. A child's exit
    closes its descriptors one by one and only then turns its pidfd readable, so the first
    pipe's EOF wakes us microseconds early: after a pass in which a pipe ended, the set is
    polled in place for up to ``_EXIT_GRACE_S`` (a bounded block of the loop) before parking
    again. That spares most effects one or two wake-ups and scheduler passes; a child that
    closes its output and lives on costs that bound at most once per pipe. With ``defer``, a
    child seen to its end leaves the set (and its pidfd, still in it) to be closed later.
    """
    names = {proc.stdout_fd: "stdout", proc.stderr_fd: "stderr"}
    ready = select.epoll()
    finished = False
    try:
        for fd in (*names, exit_fd):
            ready.register(fd, select.EPOLLIN)
        # A quick child may be done already (it ran while ``Popen`` returned): no wake-up then.
        events = ready.poll(0)
        while True:
            if not events:
                await trio.lowlevel.wait_readable(ready.fileno())
                events = ready.poll(0)
            ended = _handle(events, names, proc, cap, exit_fd, defer is not None)
            if finished := proc.returncode is not None and not names:
                return  # the set is closed below: no member needs unregistering
            if proc.returncode is not None and cap.stopped is not None:
                # A limit was hit and the tree killed: stop reading. A process that left
                # the group (``setsid``) may hold the pipes open; waiting for their EOF
                # would turn a definitive overflow into a timeout.
                return
            for fd in ended:  # an ended pipe stays readable (EOF): keep it out of the wait
                ready.unregister(fd)
            events = ready.poll(_EXIT_GRACE_S) if ended else []
    finally:
        if finished and defer is not None:
            defer(functools.partial(_close_set, ready))
        else:
            _close_set(ready)


def _close_set(ready: select.epoll) -> None:
    trio.lowlevel.notify_closing(ready.fileno())
    ready.close()


def _handle(
    events: list[tuple[int, int]],
    names: dict[int, str],
    proc: Child,
    cap: _Capture,
    exit_fd: int,
    deferring: bool,
) -> list[int]:
    """Act on one poll's events; returns the pipes that reached EOF (dropped from ``names``).
    The pipes go first: once both ended, the exit ends the loop, so the pidfd, reaped, may
    stay open in the set (``deferring``: closed with it) — it stays readable, and a loop that
    went on would see it again."""
    ended = []
    exited = False
    for fd, _ in events:
        if fd == exit_fd:
            exited = True
        elif not _keep_chunk(fd, names[fd], cap, proc.pid):
            ended.append(fd)
            del names[fd]
    if exited:  # reaps; closing the pidfd (now or with the set) drops it from the set
        _end_group(proc, keep_exit_fd=deferring and not names)
    return ended


def _keep_chunk(fd: int, name: str, cap: _Capture, pid: int) -> bool:
    """Read what the pipe ``fd`` holds into ``cap``; False at its EOF."""
    try:
        chunk = os.read(fd, _CHUNK)
    except BlockingIOError:
        return True
    if not chunk:
        return False
    _take(cap, name, chunk, pid)
    return True


def _spawn(argv: Sequence[str], env: Mapping[str, str], cwd: str | None, *, piped: bool) -> Child:
    name = os.path.basename(argv[0]) if argv else "<empty argv>"
    _refuse_nul(name, argv, env)
    try:
        # Own process group, but the worker's session: a coordinator that loses the
        # worker can still find (by session id) and kill what that worker started.
        return spawn_child(argv, env=env, cwd=cwd, piped_stdin=piped)
    except OSError as exc:
        raise RunFailedError(f"cannot start process {name!r}: {exc.strerror}") from exc


def _refuse_nul(name: str, argv: Sequence[str], env: Mapping[str, str]) -> None:
    """No process argument or variable can hold a NUL byte: the spawn could never happen, so
    this is a definitive failure before anything starts (not an internal error after
    dispatch, which would leave the effect uncertain)."""
    args = (f"argument {i}" for i, arg in enumerate(argv) if "\x00" in arg)
    names = (f"variable {k}" for k, v in env.items() if "\x00" in k or "\x00" in v)
    where = next(args, None) or next(names, None)  # stops at the first: a spawn's hot path
    if where is not None:
        raise RunFailedError(
            f"cannot start process {name!r}: {where} contains a NUL byte, which no "
            "process argument or environment variable can hold"
        )


async def run_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | None,
    timeout_s: float,
    stdout_limit: int,
    stderr_limit: int,
    combined_limit: int,
    memory_limit_bytes: int | None = None,
    cpu_limit_s: float | None = None,
    stdin: bytes | None = None,
    defer: Defer | None = None,
) -> ProcessResult:
    """Run ``argv`` to completion within the given bounds; see the module invariants (and
    for ``defer``: the closers it is given must be called, once the caller has answered)."""
    if not argv:
        raise RunFailedError("cannot start process: empty argv")
    limits = Limits(stdout_limit, stderr_limit, combined_limit, memory_limit_bytes, cpu_limit_s)
    cap = _Capture(limits)
    proc = _spawn(argv, env, cwd, piped=stdin is not None)
    settled = False
    try:
        with trio.move_on_after(timeout_s):
            await _supervise(proc, cap, stdin, defer)
        if proc.returncode is None:
            cap.stop("timed_out", f"timed out after {seconds_text(timeout_s)} s")
        settled = True
    finally:
        if proc.returncode is None:
            kill_tree(proc.pid)  # only unreaped: a reaped pid may be another process's now
            with trio.CancelScope(shield=True):
                await proc.wait()
        # Closed without a checkpoint: the effect's answer does not wait for a scheduler pass.
        if settled and defer is not None:
            defer(proc.close)
        else:
            proc.close()
    return _result(proc, cap)


def _result(proc: Child, cap: _Capture) -> ProcessResult:
    if cap.stopped is not None:
        outcome, detail = cap.stopped
        return ProcessResult(outcome, None, b"", b"", detail)
    return ProcessResult(
        "exited", proc.returncode, bytes(cap.buffers["stdout"]), bytes(cap.buffers["stderr"])
    )
