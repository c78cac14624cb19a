"""spawn_child with real children: descriptors, pipes, exit before reap, the thread fallback."""

from __future__ import annotations

import errno
import os
import signal
import sys
from pathlib import Path

import psutil
import pytest
import trio

from agentctl.sandbox.spawn import spawn_child


def _open_fds() -> set[str]:
    """The descriptors open now, after one child has started: the first child without piped
    stdin opens the /dev/null descriptor kept for the process's life, which is no leak."""
    child = spawn_child(["/bin/true"], env={}, cwd=None, piped_stdin=False)
    child.close_pipes()
    trio.run(child.wait)
    return set(os.listdir("/proc/self/fd"))


def test_failed_spawn_leaks_no_descriptor() -> None:
    before = _open_fds()
    with pytest.raises(OSError):
        spawn_child(["/no/such/binary"], env={}, cwd=None, piped_stdin=True)
    assert _open_fds() == before


def test_child_inherits_only_its_standard_streams() -> None:
    keep_r, keep_w = os.pipe()  # inheritable in the parent: close_fds must still hide it
    os.set_inheritable(keep_w, True)
    script = "import os; print(sorted(int(f) for f in os.listdir('/proc/self/fd')))"

    async def main() -> bytes:
        child = spawn_child([sys.executable, "-c", script], env={}, cwd=None, piped_stdin=False)
        out = await child.stdout.receive_some(4096)
        assert await child.wait() == 0
        child.close_pipes()
        return out

    try:
        out = trio.run(main)
    finally:
        os.close(keep_r)
        os.close(keep_w)
    fds = [int(f) for f in out.decode().strip("[]\n").split(",")]
    assert [f for f in fds if f > 2 and f != max(fds)] == []  # max: listdir's own handle


def test_stdin_round_trip_and_exit_status() -> None:
    async def main() -> tuple[bytes, int]:
        child = spawn_child(["/bin/sh", "-c", "cat; exit 3"], env={}, cwd="/", piped_stdin=True)
        assert child.stdin is not None
        await child.stdin.send_all(b"hello")
        await child.stdin.aclose()
        data = b""
        while chunk := await child.stdout.receive_some(4096):
            data += chunk
        code = await child.wait()
        child.close_pipes()
        return data, code

    assert trio.run(main) == (b"hello", 3)


def test_exited_child_stays_a_zombie_until_reaped() -> None:
    async def main() -> None:
        child = spawn_child(["/bin/true"], env={}, cwd=None, piped_stdin=False)
        await child.wait_exited()
        # Not reaped yet: its pid (and process-group id) cannot have been recycled.
        assert psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE
        assert os.getpgid(child.pid) == child.pid
        assert child.reap() == 0
        assert not psutil.pid_exists(child.pid) or psutil.Process(child.pid).ppid() != os.getpid()
        child.close_pipes()

    trio.run(main)


def test_without_pidfd_the_wait_runs_in_a_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "pidfd_open", raising=False)

    async def main() -> int:
        child = spawn_child(["/bin/sh", "-c", "exit 5"], env={}, cwd=None, piped_stdin=False)
        code = await child.wait()
        child.close_pipes()
        return code

    assert trio.run(main) == 5


def _start_error(argv: list[str]) -> tuple[type[OSError], int, str]:
    with pytest.raises(OSError) as caught:
        spawn_child(argv, env={}, cwd=None, piped_stdin=False)
    err = caught.value
    return type(err), err.errno, err.strerror


@pytest.mark.parametrize("case", ["missing", "not_executable", "directory", "bad_format"])
def test_a_child_that_cannot_start_says_why(tmp_path: Path, case: str) -> None:
    target = tmp_path / "prog"
    if case == "not_executable":
        target.write_text("#!/bin/sh\n")
    elif case == "directory":
        target.mkdir()
    elif case == "bad_format":
        target.write_bytes(b"\x00\x01 not a program")
        target.chmod(0o755)
    before = _open_fds()
    kind, code, _reason = _start_error([str(target)])
    assert _open_fds() == before
    assert issubclass(kind, OSError)
    assert code == {"missing": errno.ENOENT, "bad_format": errno.ENOEXEC}.get(case, errno.EACCES)


def test_python_ignored_signals_are_reset_and_the_child_leads_its_group() -> None:
    script = "grep -E '^Sig(Ign|Blk)' /proc/self/status; echo pgid $(ps -o pgid= -p $$)"

    async def main() -> tuple[bytes, int]:
        child = spawn_child(["/bin/sh", "-c", script], env={}, cwd=None, piped_stdin=False)
        out = b""
        while chunk := await child.stdout.receive_some(4096):
            out += chunk
        code = await child.wait()
        child.close_pipes()
        return out, child.pid if code == 0 else -1

    assert signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN  # what Python does at start
    # What this process was started with passes on as it is (a runner may start the tests
    # with a signal ignored or blocked: exec keeps both); what Python itself ignores does not.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    out, pid = trio.run(main)
    words = out.decode().split()
    blocked, ignored, group = int(words[1], 16), int(words[3], 16), int(words[5])
    assert blocked == sum(1 << (sig - 1) for sig in mask)  # bit n-1: signal n
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        assert not ignored & (1 << (sig - 1)), sig
    assert group == pid


def test_the_child_gets_exactly_the_given_environment() -> None:
    async def main() -> bytes:
        child = spawn_child(["/usr/bin/env"], env={"ONLY": "this"}, cwd=None, piped_stdin=False)
        out = await child.stdout.receive_some(4096)
        assert await child.wait() == 0
        child.close_pipes()
        return out

    assert trio.run(main) == b"ONLY=this\n"
