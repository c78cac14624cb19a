"""A real worker process over a real socketpair: handshake, executors, cancel, EOF."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import trio

from agentctl.mailbox import Cancel, Execute, Failure, FrameChannel, Hello, Result, Shutdown
from tests.wire_messages import execute_msg
from tests.worker_process import Worker as WorkerUnderTest
from tests.worker_process import open_worker


@pytest.fixture
async def worker() -> AsyncIterator[WorkerUnderTest]:
    async with open_worker() as started:
        yield started


def _write(ws: Path, path: str, content: str, **extra: Any) -> Execute:
    req = {"workspace": str(ws), "writableRoots": ["out"], "path": path, "content": content}
    return execute_msg("builtin.write", {**req, **extra})


async def test_write_then_read_then_unchanged_write(
    worker: WorkerUnderTest, tmp_path: Path
) -> None:
    first = await worker.call(_write(tmp_path, "out/sub/a.txt", "hello\n", diff=True))
    assert isinstance(first, Result), first
    assert first.output["status"] == "changed" and first.output["changed"] is True
    assert first.output["before"] is None and first.output["after"] == "hello\n"
    assert "+hello" in first.output["diff"]
    assert first.output["predictability"] == "partially_predictable"
    assert first.artifacts == ["out/sub/a.txt"]
    assert (tmp_path / "out" / "sub" / "a.txt").read_text() == "hello\n"
    assert not [p for p in (tmp_path / "out" / "sub").iterdir() if p.name.endswith(".tmp")]

    read = await worker.call(
        execute_msg("builtin.read", {"workspace": str(tmp_path), "path": "out/sub/a.txt"})
    )
    assert isinstance(read, Result)
    assert read.output == {"status": "unchanged", "changed": False, "content": "hello\n"}

    again = await worker.call(_write(tmp_path, "out/sub/a.txt", "hello\n"))
    assert isinstance(again, Result)
    assert again.output["status"] == "unchanged" and again.output["diff"] is None
    assert again.artifacts == []


async def test_escaping_write_is_denied_and_writes_nothing(
    worker: WorkerUnderTest, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    ws = tmp_path / "ws"
    (ws / "out").mkdir(parents=True)
    (ws / "out" / "esc").symlink_to(outside, target_is_directory=True)
    reply = await worker.call(_write(ws, "out/esc/x.txt", "pwned"))
    assert isinstance(reply, Failure)
    assert reply.error.type == "PolicyDeniedError" and not reply.uncertain
    assert list(outside.iterdir()) == []


async def test_read_of_missing_file_is_a_retryable_io_failure(
    worker: WorkerUnderTest, tmp_path: Path
) -> None:
    reply = await worker.call(
        execute_msg("builtin.read", {"workspace": str(tmp_path), "path": "nope.txt"})
    )
    assert isinstance(reply, Failure)
    assert reply.error.retryable and not reply.uncertain


async def test_shell_exec_success_failure_and_allowlist(
    worker: WorkerUnderTest, tmp_path: Path
) -> None:
    base = {"workspace": str(tmp_path), "env": {"TOKEN": "s3cr3t"}, "processAllowlist": ["sh"]}
    ok = await worker.call(
        execute_msg(
            "builtin.shell.exec",
            {**base, "command": "/bin/sh", "args": ["-c", "echo hi $TOKEN; pwd"]},
        )
    )
    assert isinstance(ok, Result), ok
    assert ok.output["exitCode"] == 0 and ok.output["status"] == "changed"
    assert ok.output["stdout"] == f"hi [REDACTED]\n{os.path.realpath(tmp_path)}\n"

    bad = await worker.call(
        execute_msg(
            "builtin.shell.exec",
            {**base, "command": "/bin/sh", "args": ["-c", "exit 7"]},
            effect_id="e2",
        )
    )
    assert isinstance(bad, Failure) and not bad.uncertain and not bad.error.retryable
    assert "7" in bad.error.message

    denied = await worker.call(
        execute_msg("builtin.shell.exec", {**base, "command": "/bin/echo"}, effect_id="e3")
    )
    assert isinstance(denied, Failure) and denied.error.type == "PolicyDeniedError"


async def test_shell_effects_leave_no_descriptor_open_in_the_worker(
    worker: WorkerUnderTest, tmp_path: Path
) -> None:
    # The worker closes a finished child's descriptors only after the effect's reply is sent
    # (off the reply's path): each must still be closed, whether the child was seen exiting
    # at once or after a wait.
    def shell(command: str, *args: str) -> Execute:
        req = {"workspace": str(tmp_path), "command": command, "args": list(args)}
        return execute_msg("builtin.shell.exec", req)

    # (the worker's own descriptors are all open after one: its children's /dev/null)
    assert isinstance(await worker.call(shell("/bin/true")), Result)
    await worker.call(execute_msg("bench.noop", {}))  # read once the last effect's task is done
    before = psutil.Process(worker.proc.pid).num_fds()
    for _ in range(5):
        assert isinstance(await worker.call(shell("/bin/true")), Result)
        assert isinstance(await worker.call(shell("/bin/sleep", "0.05")), Result)
    await worker.call(execute_msg("bench.noop", {}))
    assert psutil.Process(worker.proc.pid).num_fds() == before


async def test_a_reply_larger_than_the_socket_buffer_arrives_whole(
    worker: WorkerUnderTest, tmp_path: Path
) -> None:
    # A blocked effect's reply goes out from its scope as far as the kernel takes it at once;
    # the rest of a frame larger than the socket's buffer must follow, before any other frame.
    script = "head -c 900000 /dev/zero | tr '\\0' x"
    req = {"workspace": str(tmp_path), "command": "/bin/sh", "args": ["-c", script]}
    req["env"] = {"PATH": "/usr/bin:/bin"}
    with trio.fail_after(60):  # (a frame cut short would leave the reader waiting for ever)
        big = await worker.call(execute_msg("builtin.shell.exec", req))
        assert isinstance(big, Result) and big.output["stdout"] == "x" * 900000
        after = await worker.call(
            execute_msg("builtin.shell.exec", {**req, "args": ["-c", "echo ok"]})
        )
    assert isinstance(after, Result) and after.output["stdout"] == "ok\n"


async def test_shell_timeout_and_overflow(worker: WorkerUnderTest, tmp_path: Path) -> None:
    base = {"workspace": str(tmp_path), "command": "/bin/sh"}
    slow = {**base, "args": ["-c", "sleep 30"], "limits": {"timeoutSeconds": 1}}
    timed_out = await worker.call(execute_msg("builtin.shell.exec", slow))
    assert isinstance(timed_out, Failure) and timed_out.uncertain
    loud = {**base, "args": ["-c", "yes"], "limits": {"stdoutLimitBytes": 1000}}
    overflow = await worker.call(execute_msg("builtin.shell.exec", loud, effect_id="e2"))
    assert isinstance(overflow, Failure) and not overflow.uncertain
    assert "limit" in overflow.error.message


async def test_unknown_operation_and_bad_request_fail_cleanly(worker: WorkerUnderTest) -> None:
    unknown = await worker.call(execute_msg("test.sleep", {}))
    assert isinstance(unknown, Failure) and unknown.error.type == "ValidationError"
    bad = await worker.call(execute_msg("builtin.read", {"path": 3}, effect_id="e2"))
    assert isinstance(bad, Failure) and bad.error.type == "ValidationError" and not bad.uncertain


async def _pid_from(path: Path) -> int:
    while not path.exists() or not path.read_text().strip():
        await trio.sleep(0.02)
    return int(path.read_text())


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 10  # a bound on waiting, not a speed assertion
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.02)
    return False


def _sleeper(ws: Path, effect: str) -> Execute:
    pidfile = ws / f"{effect}.pid"
    return execute_msg(
        "builtin.shell.exec",
        {
            "workspace": str(ws),
            "command": "/bin/sh",
            "args": ["-c", f"echo $$ > {pidfile}; exec sleep 60"],
        },
        effect_id=effect,
    )


async def test_cancel_stops_one_effect_and_reports_uncertain(
    worker: WorkerUnderTest, tmp_path: Path
) -> None:
    await worker.channel.send(_sleeper(tmp_path, "slow"))
    pid = await _pid_from(tmp_path / "slow.pid")
    quick = execute_msg(
        "builtin.read", {"workspace": str(tmp_path), "path": "slow.pid"}, effect_id="quick"
    )
    assert isinstance(await worker.call(quick), Result)  # still serving while one effect runs
    await worker.channel.send(Cancel(effect_id="slow"))
    reply = await worker.channel.receive()
    assert isinstance(reply, Failure) and reply.effect_id == "slow" and reply.uncertain
    assert _gone(pid)


async def test_effects_answered_at_once_leave_the_next_ones_timeout_and_cancel_intact(
    worker: WorkerUnderTest, tmp_path: Path
) -> None:
    # Effects answered at once share their reader's cancel scope; the one that blocks next
    # in that reader takes it over, with its own timeout, and a Cancel reaches only it.
    (tmp_path / "a.txt").write_text("a")
    read = {"workspace": str(tmp_path), "path": "a.txt"}
    for _ in range(3):  # refused before they start: answered at once, in the reader's scope
        assert isinstance(await worker.call(execute_msg("test.unknown", {})), Failure)
    slow = _sleeper(tmp_path, "slow").model_copy(update={"timeout_seconds": 1})
    timed_out = await worker.call(slow)
    assert isinstance(timed_out, Failure) and timed_out.uncertain
    assert "timed out after 1" in timed_out.error.message
    assert _gone(int((tmp_path / "slow.pid").read_text()))
    for _ in range(3):
        assert isinstance(await worker.call(execute_msg("test.unknown", {})), Failure)
        assert isinstance(await worker.call(execute_msg("builtin.read", read)), Result)
    await worker.channel.send(_sleeper(tmp_path, "kept"))
    await worker.channel.send(_sleeper(tmp_path, "cancelled"))
    kept, pid = await _pid_from(tmp_path / "kept.pid"), await _pid_from(tmp_path / "cancelled.pid")
    await worker.channel.send(Cancel(effect_id="cancelled"))
    reply = await worker.channel.receive()
    assert isinstance(reply, Failure) and reply.effect_id == "cancelled" and reply.uncertain
    assert "cancelled" in reply.error.message and _gone(pid)
    assert psutil.Process(kept).status() != psutil.STATUS_ZOMBIE
    assert isinstance(await worker.call(execute_msg("builtin.read", read)), Result)


async def test_eof_kills_running_children_and_the_worker_exits(
    worker: WorkerUnderTest, tmp_path: Path
) -> None:
    await worker.channel.send(_sleeper(tmp_path, "orphan"))
    pid = await _pid_from(tmp_path / "orphan.pid")
    await worker.channel.aclose()
    await worker.proc.wait()
    assert _gone(pid)


async def test_shutdown_finishes_running_effects_first(
    worker: WorkerUnderTest, tmp_path: Path
) -> None:
    msg = execute_msg(
        "builtin.shell.exec",
        {"workspace": str(tmp_path), "command": "/bin/sh", "args": ["-c", "sleep 1; echo done"]},
    )
    await worker.channel.send(msg)
    await worker.channel.send(Shutdown())
    reply = await worker.channel.receive()
    assert isinstance(reply, Result) and reply.output["stdout"] == "done\n"
    assert await worker.channel.receive() is None
    assert await worker.proc.wait() == 0


def test_crash_point_kills_the_worker_before_it_replies(tmp_path: Path) -> None:
    parent, child = socket.socketpair()
    env = {**os.environ, "AGENTCTL_CRASH_AT": "worker.before_result"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentctl.workers", "--fd", str(child.fileno())],
        pass_fds=(child.fileno(),),
        env=env,
    )
    child.close()

    async def drive() -> list[object]:
        channel = FrameChannel(trio.SocketStream(trio.socket.from_stdlib_socket(parent)))
        seen: list[object] = [await channel.receive()]
        await channel.send(_write(tmp_path, "out/a.txt", "x"))
        seen.append(await channel.receive())
        return seen

    seen = trio.run(drive)
    assert isinstance(seen[0], Hello) and seen[1] is None  # EOF: no reply was ever sent
    assert proc.wait(timeout=30) == -9
    assert (tmp_path / "out" / "a.txt").read_text() == "x"  # it executed before dying
