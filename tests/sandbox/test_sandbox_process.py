"""run_process with real children: cleared env, caps, timeouts, limits and tree kills."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
import trio

from agentctl.errors import RunFailedError
from agentctl.sandbox import process
from agentctl.sandbox.process import ProcessResult, run_process
from agentctl.sandbox.spawn import Child

MIB = 1024 * 1024


async def _run(argv: list[str], **kw: object) -> ProcessResult:
    opts: dict[str, object] = {
        "env": {},
        "cwd": None,
        "timeout_s": 60,
        "stdout_limit": MIB,
        "stderr_limit": MIB,
        "combined_limit": 2 * MIB,
    }
    opts.update(kw)
    return await run_process(argv, **opts)  # type: ignore[arg-type]


def _gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (exited or a zombie awaiting its reaper)."""
    deadline = time.monotonic() + 10  # a bound on waiting, not an assertion about speed
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.02)
    return False


async def _wait_for_pids(path: Path, count: int) -> list[int]:
    while True:
        if path.exists():
            pids = [int(x) for x in path.read_text().split()]
            if len(pids) >= count:
                return pids
        await trio.sleep(0.02)


async def test_env_is_exactly_what_the_caller_passes(tmp_path: Path) -> None:
    result = await _run(["/usr/bin/env"], env={"ONLY": "this"}, cwd=str(tmp_path))
    assert result.ok
    assert result.stdout == b"ONLY=this\n"


async def test_exit_code_and_both_streams_are_captured() -> None:
    result = await _run(["/bin/sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (result.outcome, result.exit_code) == ("exited", 3)
    assert (result.stdout, result.stderr) == (b"out\n", b"err\n")


async def test_missing_binary_is_a_run_failure() -> None:
    with pytest.raises(RunFailedError):
        await _run(["/nonexistent/tool"])


@pytest.mark.parametrize(
    ("argv", "env", "where"),
    [
        (["/bin/echo", "a\x00b"], {}, "argument 1"),
        (["/bin/echo", "ok"], {"X": "a\x00b"}, "variable X"),
    ],
)
async def test_a_nul_byte_is_a_run_failure_before_anything_starts(
    argv: list[str], env: dict[str, str], where: str
) -> None:
    # No process could receive it: a definitive failure (the effect failed), not the
    # ValueError of an internal error after dispatch (which leaves the effect uncertain).
    with pytest.raises(RunFailedError, match=f"'echo': {where} contains a NUL byte"):
        await _run(argv, env=env)


async def test_huge_output_is_cut_off_and_memory_stays_bounded() -> None:
    script = "import sys\nb = b'x' * 65536\nfor _ in range(1600): sys.stdout.buffer.write(b)"
    # Growth, not the total: the test process's own size depends on what other tests imported.
    before = psutil.Process().memory_info().rss
    result = await _run([sys.executable, "-c", script])  # ~100 MiB against a 1 MiB limit
    assert result.outcome == "output_limit"
    assert "stdout" in result.detail
    assert result.stdout == b"" and result.stderr == b""
    assert psutil.Process().memory_info().rss - before < 50 * MIB


async def test_combined_limit_applies_across_streams() -> None:
    script = (
        "import sys\nsys.stdout.write('a' * 600)\nsys.stdout.flush()\nsys.stderr.write('b' * 600)"
    )
    result = await _run(
        [sys.executable, "-c", script], stdout_limit=1000, stderr_limit=1000, combined_limit=1000
    )
    assert result.outcome == "output_limit"
    assert "combined" in result.detail


async def test_timeout_kills_the_whole_tree(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    # One grandchild stays in the group, one escapes it with setsid: both must die.
    script = (
        f"sleep 60 & echo $! >> {pidfile}; setsid sleep 60 & echo $! >> {pidfile}; "
        f"echo $$ >> {pidfile}; wait"
    )
    result = await _run(["/bin/sh", "-c", script], env={"PATH": "/usr/bin:/bin"}, timeout_s=2)
    assert result.outcome == "timed_out"
    pids = [int(x) for x in pidfile.read_text().split()]
    assert len(pids) == 3
    assert all(_gone(pid) for pid in pids)


async def test_cancellation_kills_the_tree_before_reraising(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    script = f"sleep 60 & echo $! >> {pidfile}; echo $$ >> {pidfile}; wait"
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_run, ["/bin/sh", "-c", script])
            pids = await _wait_for_pids(pidfile, 2)
            scope.cancel()
    assert scope.cancelled_caught
    assert all(_gone(pid) for pid in pids)


async def test_background_leftovers_are_killed_after_the_leader_exits(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    # The leader exits at once while its background child still holds stdout open.
    result = await _run(["/bin/sh", "-c", f"sleep 60 & echo $! > {pidfile}"], timeout_s=120)
    assert result.ok
    assert _gone(int(pidfile.read_text()))


async def _open_fds_at_rest() -> int:
    """Descriptors open between children (after a first one: the shared /dev/null is open)."""
    assert (await _run(["/bin/true"])).ok
    return _open_fds()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_deferred_descriptors_stay_open_until_their_closers_run() -> None:
    before = await _open_fds_at_rest()
    closers: list[Callable[[], None]] = []
    result = await _run(["/bin/true"], defer=closers.append)
    assert result.ok
    # The epoll set (with the reaped child's pidfd in it) and the child's pipes and pidfd.
    assert len(closers) == 2 and _open_fds() > before
    for closer in closers:
        closer()
    assert _open_fds() == before
    assert (await _run(["/bin/true"])).ok and _open_fds() == before  # no defer: closed at once


async def test_a_leader_whose_pipes_outlive_it_is_reaped_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A grandchild in its own session (not killed with the group) holds stdout after the
    # leader exits: the supervision goes on, so the reaped leader's pidfd, which stays
    # readable, must leave the set at once even when descriptors are deferred.
    before = await _open_fds_at_rest()
    ends: list[bool] = []
    end_group = process._end_group

    def counted(proc: Child, *, keep_exit_fd: bool = False) -> None:
        ends.append(keep_exit_fd)
        end_group(proc, keep_exit_fd=keep_exit_fd)

    monkeypatch.setattr(process, "_end_group", counted)
    closers: list[Callable[[], None]] = []
    argv = ["/bin/sh", "-c", "setsid sleep 0.3 & exit 0"]
    result = await _run(argv, env={"PATH": "/usr/bin:/bin"}, defer=closers.append)
    assert result.ok and ends == [False]
    for closer in closers:
        closer()
    assert _open_fds() == before


async def test_memory_limit_kills_the_tree() -> None:
    script = "import time\nx = b'x' * (200 * 1024 * 1024)\ntime.sleep(60)"
    result = await _run([sys.executable, "-c", script], memory_limit_bytes=64 * MIB)
    assert result.outcome == "memory_limit"


async def test_cpu_limit_kills_the_tree() -> None:
    result = await _run([sys.executable, "-c", "while True: pass"], cpu_limit_s=0.5)
    assert result.outcome == "cpu_limit"


# Each stream is written in 300 kB bursts, alternating, well past a pipe's 64 KiB buffer: a
# supervisor that drained one pipe at a time (or waited for the exit first) would deadlock.
_BOTH_STREAMS = (
    "import sys\n"
    "for i in range(3):\n"
    "    sys.stdout.write(str(i) * 300000); sys.stdout.flush()\n"
    "    sys.stderr.write(chr(97 + i) * 300000); sys.stderr.flush()\n"
)
_BOTH_EXPECTED = (
    b"0" * 300000 + b"1" * 300000 + b"2" * 300000,
    b"a" * 300000 + b"b" * 300000 + b"c" * 300000,
)


async def test_both_streams_beyond_a_pipe_buffer_are_captured_whole() -> None:
    result = await _run([sys.executable, "-c", _BOTH_STREAMS])
    assert result.ok, result.detail
    assert (result.stdout, result.stderr) == _BOTH_EXPECTED


async def test_without_pidfd_the_pipes_are_drained_by_tasks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delattr(os, "pidfd_open", raising=False)
    result = await _run([sys.executable, "-c", _BOTH_STREAMS])
    assert (result.stdout, result.stderr) == _BOTH_EXPECTED
    pids = tmp_path / "pids"
    script = f"sleep 30 & echo $! > {pids}; exit 0"
    result = await _run(["/bin/sh", "-c", script])
    assert result.ok
    assert _gone(int(pids.read_text()))


async def test_stdin_and_a_memory_watch_run_beside_the_drain() -> None:
    data = b"x" * 300000
    result = await _run(["/bin/cat"], stdin=data, memory_limit_bytes=512 * MIB, cpu_limit_s=60.0)
    assert result.ok, result.detail
    assert result.stdout == data


async def test_a_child_that_closes_its_output_is_still_waited_for() -> None:
    # Both pipes end long before the exit: the supervisor must go back to waiting for it.
    script = "import os, time; os.write(1, b'hi'); os.close(1); os.close(2); time.sleep(0.3)"
    result = await _run([sys.executable, "-c", script + "; os._exit(3)"])
    assert (result.outcome, result.exit_code, result.stdout) == ("exited", 3, b"hi")


async def test_children_read_an_empty_stdin_and_leave_no_descriptor_behind() -> None:
    argv = [sys.executable, "-c", "import sys; print(repr(sys.stdin.read()))"]
    first = await _run(argv)
    assert first.stdout.strip() == b"''"
    before = set(os.listdir("/proc/self/fd"))
    for _ in range(5):
        assert (await _run(argv)).stdout == first.stdout
    assert set(os.listdir("/proc/self/fd")) == before
