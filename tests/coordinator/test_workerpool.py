"""The worker pool with real worker processes: dispatch, loss, bad frames, shutdown, stale kill."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import trio

from agentctl.coordinator.workerpool import open_worker_pool
from agentctl.coordinator.workerproc import kill_stale_workers, signal_tree
from agentctl.envknobs import ANSWER_GRACE_SECONDS
from agentctl.ledger.owners import process_start_time
from agentctl.mailbox import Execute, Failure, FrameChannel, Result
from tests.wire_messages import execute_msg


def _shell(ws: Path, script: str) -> Execute:
    return execute_msg(
        "builtin.shell.exec", {"workspace": str(ws), "command": "/bin/sh", "args": ["-c", script]}
    )


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


async def _pid_from(path: Path) -> int:
    while not path.exists() or not path.read_text().strip():
        await trio.sleep(0.02)
    return int(path.read_text())


async def test_lazy_start_and_real_file_effects(tmp_path: Path) -> None:
    async with open_worker_pool(2) as pool:
        assert pool.worker_pids() == []
        write = execute_msg(
            "builtin.write",
            {
                "workspace": str(tmp_path),
                "writableRoots": ["out"],
                "path": "out/a.txt",
                "content": "hi",
            },
        )
        reply = await pool.execute(write)
        assert isinstance(reply, Result) and reply.effect_id == write.effect_id
        assert len(pool.worker_pids()) == 1  # one idle worker is reused, not a second spawned
        read = await pool.execute(
            execute_msg("builtin.read", {"workspace": str(tmp_path), "path": "out/a.txt"})
        )
        assert isinstance(read, Result) and read.output["content"] == "hi"
        assert len(pool.worker_pids()) == 1
        pids = pool.worker_pids()
    assert all(_gone(pid) for pid in pids)


async def test_sixteen_concurrent_effects_through_two_workers(tmp_path: Path) -> None:
    replies: list[Result | Failure] = []
    async with open_worker_pool(2) as pool:

        async def one(i: int) -> None:
            replies.append(await pool.execute(_shell(tmp_path, f"sleep 1; echo {i}")))

        async with trio.open_nursery() as nursery:
            for i in range(16):
                nursery.start_soon(one, i)
        assert len(pool.worker_pids()) == 2
    assert all(isinstance(r, Result) for r in replies)
    assert sorted(int(r.output["stdout"]) for r in replies if isinstance(r, Result)) == list(
        range(16)
    )


async def test_killed_worker_resolves_as_uncertain_worker_lost(tmp_path: Path) -> None:
    async with open_worker_pool(1) as pool:
        result: list[Result | Failure] = []

        async def slow() -> None:
            result.append(
                await pool.execute(_shell(tmp_path, f"echo $$ > {tmp_path}/p; exec sleep 60"))
            )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow)
            child = await _pid_from(tmp_path / "p")
            [victim] = pool.worker_pids()
            os.kill(victim, signal.SIGKILL)
        [lost] = result
        assert isinstance(lost, Failure) and lost.uncertain and lost.error.type == "WorkerLost"
        assert _gone(child)  # the lost worker's tree is killed too
        fresh = await pool.execute(_shell(tmp_path, "echo again"))
        assert isinstance(fresh, Result) and fresh.output["stdout"] == "again\n"
        assert pool.worker_pids() != [victim]


async def test_a_frozen_worker_is_lost_at_its_effects_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pool's one timer: a call with a later deadline arms it first, the frozen worker's
    # call with an earlier one must move it forward, and it keeps working after a loss.
    monkeypatch.setenv(ANSWER_GRACE_SECONDS, "0.5")
    async with open_worker_pool(1) as pool:
        assert isinstance(await pool.execute(_shell(tmp_path, "true")), Result)  # 120 s + grace
        result: list[Result | Failure] = []
        frozen = _shell(tmp_path, f"echo $$ > {tmp_path}/p; exec sleep 60")

        async def hung() -> None:
            result.append(await pool.execute(frozen.model_copy(update={"timeout_seconds": 1})))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(hung)
            child = await _pid_from(tmp_path / "p")
            [victim] = pool.worker_pids()
            os.kill(victim, signal.SIGSTOP)  # neither its own timeout nor any answer comes
        [lost] = result
        assert isinstance(lost, Failure) and lost.uncertain and lost.error.type == "WorkerLost"
        assert "no answer within 1.5s" in lost.error.message
        assert _gone(victim) and _gone(child)
        again = frozen.model_copy(update={"effect_id": "after", "timeout_seconds": 1})
        os.unlink(tmp_path / "p")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: pool.execute(again))
            await _pid_from(tmp_path / "p")
            [second] = pool.worker_pids()
            os.kill(second, signal.SIGSTOP)
        assert _gone(second)  # the timer, re-armed after the first loss, fired again


async def test_a_hung_worker_is_lost_when_the_registry_can_no_longer_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The registry's directory becomes a file after start: its next write fails for real
    # (ENOTDIR). The timer still loses the frozen worker, and the pool (its nursery) lives on.
    monkeypatch.setenv(ANSWER_GRACE_SECONDS, "0.5")
    regdir = tmp_path / "reg"
    regdir.mkdir()
    async with open_worker_pool(1, registry_path=str(regdir / "workers.json")) as pool:
        frozen = _shell(tmp_path, f"echo $$ > {tmp_path}/p; exec sleep 60")
        result: list[Result | Failure] = []

        async def hung() -> None:
            result.append(await pool.execute(frozen.model_copy(update={"timeout_seconds": 1})))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(hung)
            await _pid_from(tmp_path / "p")
            [victim] = pool.worker_pids()
            shutil.rmtree(regdir)
            regdir.write_text("not a directory")
            os.kill(victim, signal.SIGSTOP)
        [lost] = result
        assert isinstance(lost, Failure) and lost.error.type == "WorkerLost"
        # A new worker is started only with its registry entry written: restore the directory.
        regdir.unlink()
        regdir.mkdir()
        assert isinstance(await pool.execute(_shell(tmp_path, "true")), Result)


async def test_malformed_frame_from_a_worker_keeps_the_pool_usable(tmp_path: Path) -> None:
    # A real worker whose Result frames are corrupted on the wire (sitecustomize hook).
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import agentctl.mailbox.frames as f\n"
        "_orig = f.encode_frame\n"
        "def bad(msg):\n"
        "    return b'\\x00\\x00\\x00\\x05nope!' if msg.type == 'result' else _orig(msg)\n"
        "f.encode_frame = bad\n"
    )
    env = {**os.environ, "PYTHONPATH": str(hook)}
    async with open_worker_pool(1, env=env) as pool:
        reply = await pool.execute(_shell(tmp_path, "echo hi"))
        assert isinstance(reply, Failure) and reply.error.type == "WorkerLost" and reply.uncertain
        assert "malformed" in reply.error.message
        # Failure frames are intact: the replacement worker still answers definitively.
        denied = await pool.execute(
            execute_msg("builtin.read", {"workspace": str(tmp_path), "path": "../x"})
        )
        assert isinstance(denied, Failure) and denied.error.type == "PolicyDeniedError"


async def test_pool_cancel_reports_uncertain(tmp_path: Path) -> None:
    async with open_worker_pool(1) as pool:
        msg = _shell(tmp_path, f"echo $$ > {tmp_path}/p; exec sleep 60")
        result: list[Result | Failure] = []

        async def run() -> None:
            result.append(await pool.execute(msg))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            child = await _pid_from(tmp_path / "p")
            await pool.cancel(msg.effect_id)
        [reply] = result
        assert isinstance(reply, Failure) and reply.uncertain
        assert reply.error.type == "CancelledRunError"
        assert _gone(child)


async def test_one_worker_many_effects_replies_in_any_order(tmp_path: Path) -> None:
    # One worker, so every caller waits on the same socket and they take turns reading it.
    replies: dict[int, Result | Failure] = {}
    async with open_worker_pool(1) as pool:

        async def one(i: int) -> None:
            replies[i] = await pool.execute(_shell(tmp_path, f"sleep 0.{5 - i}; echo {i}"))

        async with trio.open_nursery() as nursery:
            for i in range(5):
                nursery.start_soon(one, i)
        assert len(pool.worker_pids()) == 1
    for i, reply in replies.items():
        assert isinstance(reply, Result) and reply.output["stdout"] == f"{i}\n"


async def test_an_execute_above_the_frame_limit_fails_alone_and_keeps_its_worker(
    tmp_path: Path,
) -> None:
    big = execute_msg(
        "builtin.write",
        {"workspace": str(tmp_path), "path": "big.txt", "content": "x" * (17 * 1024 * 1024)},
    )
    async with open_worker_pool(1) as pool:
        first = await pool.execute(_shell(tmp_path, "echo warm"))  # the one worker is up
        pid = pool.worker_pids()
        replies: dict[str, Result | Failure] = {}

        async def one(name: str, msg: Execute) -> None:
            replies[name] = await pool.execute(msg)

        async with trio.open_nursery() as nursery:  # an effect in flight on that worker
            nursery.start_soon(one, "slow", _shell(tmp_path, "sleep 0.3; echo slow"))
            await trio.sleep(0.05)
            nursery.start_soon(one, "big", big)
        after = await pool.execute(_shell(tmp_path, "echo after"))
        assert pool.worker_pids() == pid  # the worker was not lost
    assert isinstance(first, Result) and isinstance(after, Result)
    slow, failed = replies["slow"], replies["big"]
    assert isinstance(slow, Result) and slow.output["stdout"] == "slow\n"
    assert isinstance(failed, Failure) and not failed.error.retryable
    assert "too large to send to a worker" in failed.error.message
    assert not (tmp_path / "big.txt").exists()


async def test_a_cancelled_reading_caller_hands_the_reading_over(tmp_path: Path) -> None:
    async with open_worker_pool(1) as pool:
        first = _shell(tmp_path, f"echo $$ > {tmp_path}/p; exec sleep 60")
        second = _shell(tmp_path, f"while [ ! -e {tmp_path}/go ]; do sleep 0.05; done; echo b")
        replies: list[Result | Failure] = []

        async def later() -> None:
            replies.append(await pool.execute(second))

        with trio.fail_after(60):  # a bound on a hang, not a speed assertion
            async with trio.open_nursery() as nursery:
                with trio.CancelScope() as scope:
                    nursery.start_soon(later)
                    # ``first`` is awaited here, so this caller is the one reading.
                    nursery.start_soon(lambda: _cancel_when(scope, tmp_path / "p"))
                    await pool.execute(first)
                (tmp_path / "go").touch()
        [reply] = replies
        assert isinstance(reply, Result) and reply.output["stdout"] == "b\n"
        # The cancelled effect's late reply was dropped; the worker serves on.
        again = await pool.execute(_shell(tmp_path, "echo again"))
        assert isinstance(again, Result) and again.output["stdout"] == "again\n"


async def _cancel_when(scope: trio.CancelScope, path: Path) -> None:
    await _pid_from(path)
    scope.cancel()


async def test_a_worker_that_died_idle_is_replaced_not_given_the_effect(tmp_path: Path) -> None:
    async with open_worker_pool(1) as pool:
        first = await pool.execute(_shell(tmp_path, "echo one"))
        assert isinstance(first, Result)
        [victim] = pool.worker_pids()
        os.kill(victim, signal.SIGKILL)
        assert _gone(victim)
        reply = await pool.execute(_shell(tmp_path, "echo two"))
        assert isinstance(reply, Result) and reply.output["stdout"] == "two\n"
        assert pool.worker_pids() != [victim]


async def test_pool_exit_kills_workers_and_their_children(tmp_path: Path) -> None:
    registry = tmp_path / "workers.json"
    with trio.CancelScope() as scope:
        async with (
            open_worker_pool(1, registry_path=str(registry)) as pool,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(
                pool.execute, _shell(tmp_path, f"echo $$ > {tmp_path}/p; exec sleep 60")
            )
            child = await _pid_from(tmp_path / "p")
            [worker] = pool.worker_pids()
            data = json.loads(registry.read_text())
            assert data["workers"] == [{"pid": worker, "createTime": process_start_time(worker)}]
            scope.cancel()
    assert _gone(worker) and _gone(child)
    assert json.loads(registry.read_text())["workers"] == []


ESCAPE_GROUP = (
    "import os, sys, time; os.setpgid(0, 0); "
    "open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"
)


async def test_a_gracefully_closed_pool_still_kills_its_workers_session(tmp_path: Path) -> None:
    """An effect leaves a process that left its process group (so the worker's own kill of
    the effect's group misses it) but not the worker's session. The worker exits at
    ``Shutdown`` and is reaped; the close then finds that orphan by its session and kills it."""
    pid_file = tmp_path / "orphan"
    # Its output elsewhere: the effect ends when its pipes close, not when the orphan does;
    # and the effect waits for the orphan to have left its group (the worker kills the group
    # as the effect ends).
    orphan_argv = f"{shlex.quote(sys.executable)} -c {shlex.quote(ESCAPE_GROUP)} {pid_file}"
    script = f"{orphan_argv} >/dev/null 2>&1 & while [ ! -s {pid_file} ]; do sleep 0.01; done"
    async with open_worker_pool(1) as pool:
        reply = await pool.execute(_shell(tmp_path, script))
        assert isinstance(reply, Result), reply
        orphan = await _pid_from(pid_file)
        [worker] = pool.worker_pids()
        assert os.getsid(orphan) == worker and os.getpgid(orphan) == orphan
    assert _gone(worker) and _gone(orphan)


def test_a_reaped_pid_is_never_signalled_only_its_session(tmp_path: Path) -> None:
    """Once a worker is reaped its pid may name another process: ``signal_tree`` with
    ``reaped`` signals only the processes of the session it led, never the pid itself."""
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.2)  # started (a bound, not a speed assertion: it only has to exist)
        signal_tree(bystander.pid, signal.SIGKILL, session=True, reaped=True)
        time.sleep(0.2)
        assert bystander.poll() is None  # the number was left alone: it leads no session
        signal_tree(bystander.pid, signal.SIGKILL, session=True)
        assert bystander.wait(timeout=10) == -signal.SIGKILL  # the control: unreaped, it is hit
    finally:
        bystander.kill()
        bystander.wait()


def test_a_session_is_signalled_without_pidfds_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a kernel without ``pidfd_open`` (before 5.3) the members are still found and
    signalled, by number: the scan must not fail closed into signalling nobody."""
    import errno

    from agentctl.coordinator import workerproc

    def no_pidfds(pid: int) -> int:
        raise OSError(errno.ENOSYS, "pidfd_open")

    monkeypatch.setattr(workerproc.os, "pidfd_open", no_pidfds)
    pid_file = tmp_path / "member"
    leader = subprocess.Popen(
        ["/bin/sh", "-c", f"sleep 60 & echo $! > {pid_file}; wait"], start_new_session=True
    )
    try:
        deadline = time.monotonic() + 30  # a bound on waiting, not a speed assertion
        while not pid_file.exists() or not pid_file.read_text().strip():
            assert time.monotonic() < deadline and leader.poll() is None
            time.sleep(0.01)
        member = int(pid_file.read_text())
        workerproc.signal_tree(leader.pid, signal.SIGKILL, session=True, reaped=True)
        assert _gone(member)
        # The member only: the leader, taken as reaped, ends by itself (`wait` returns 0).
        assert leader.wait(timeout=10) == 0
    finally:
        leader.kill()
        leader.wait()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_kill_stale_workers_matches_pid_and_create_time(tmp_path: Path) -> None:
    stale = subprocess.Popen(["sleep", "60"])
    other = subprocess.Popen(["sleep", "60"])
    try:
        registry = tmp_path / "workers.json"
        registry.write_text(
            json.dumps(
                {
                    "version": 1,
                    "coordinator": {"pid": _dead_pid(), "createTime": 1.0},
                    "workers": [
                        {"pid": stale.pid, "createTime": psutil.Process(stale.pid).create_time()},
                        {"pid": other.pid, "createTime": 12345.0},  # a recycled pid: must survive
                    ],
                }
            )
        )
        assert kill_stale_workers(str(registry)) == [stale.pid]
        assert _gone(stale.pid)
        assert other.poll() is None
        assert not registry.exists()
    finally:
        for proc in (stale, other):
            proc.kill()
            proc.wait()


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "{}",
        "[]",
        json.dumps({"coordinator": 5, "workers": [7, {"pid": None}]}),
        json.dumps({"coordinator": {"pid": [1]}, "workers": {"pid": 1}}),
    ],
)
def test_kill_stale_workers_reads_a_misshapen_registry_as_recording_nothing(
    tmp_path: Path, text: str
) -> None:
    # A registry that is not JSON, no object, or whose records are not objects of numbers
    # names no process. Before, a missing pid (default -1) raised psutil's ValueError, and a
    # record that is not an object AttributeError or TypeError, out of the coordinator.
    registry = tmp_path / "workers.json"
    registry.write_text(text)
    assert kill_stale_workers(str(registry)) == []
    assert not registry.exists()


def test_kill_stale_workers_leaves_a_live_coordinators_workers(tmp_path: Path) -> None:
    owner = subprocess.Popen(["sleep", "60"])
    worker = subprocess.Popen(["sleep", "60"])
    try:
        registry = tmp_path / "workers.json"
        registry.write_text(
            json.dumps(
                {
                    "version": 1,
                    "coordinator": {
                        "pid": owner.pid,
                        "createTime": psutil.Process(owner.pid).create_time(),
                    },
                    "workers": [
                        {"pid": worker.pid, "createTime": psutil.Process(worker.pid).create_time()}
                    ],
                }
            )
        )
        assert kill_stale_workers(str(registry)) == []
        assert worker.poll() is None
    finally:
        for proc in (owner, worker):
            proc.kill()
            proc.wait()


async def test_an_execute_cancelled_before_its_frame_left_leaves_its_worker_idle() -> None:
    """Cancelled at its send (the drive's cancel watcher runs right after the ``started``
    commit): nobody will wait for that call, so the worker is idle again — not busy with a
    call whose deadline would later get it killed as hung. With room for a second worker, the
    next effect goes to the same one."""
    async with open_worker_pool(2) as pool:
        assert isinstance(await pool.execute(execute_msg("bench.noop", {})), Failure)  # warm
        assert len(pool.worker_pids()) == 1
        with trio.CancelScope() as scope:
            scope.cancel()
            await pool.execute(execute_msg("bench.noop", {}))
        assert scope.cancelled_caught
        assert isinstance(await pool.execute(execute_msg("bench.noop", {})), Failure)
        assert len(pool.worker_pids()) == 1


async def test_only_a_reply_lone_in_the_whole_pool_is_awaited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An awaited receive may spin before it parks (ADR 0014): callers waiting on two workers
    at once must not both spin, one after the other, so only the first is awaited."""
    flags: list[bool] = []
    real = FrameChannel.receive

    async def recording(self: FrameChannel, *, awaited: bool = False) -> Any:
        flags.append(awaited)
        return await real(self, awaited=awaited)

    async with open_worker_pool(2) as pool:

        async def both() -> None:
            async with trio.open_nursery() as nursery:
                for _ in range(2):
                    nursery.start_soon(pool.execute, _shell(tmp_path, "sleep 0.2"))

        await both()  # both workers started and idle
        assert len(pool.worker_pids()) == 2
        monkeypatch.setattr(FrameChannel, "receive", recording)
        await both()
        assert flags[:2] == [True, False]
        flags.clear()
        await pool.execute(_shell(tmp_path, "true"))
        assert flags == [True]


async def test_a_worker_cancelled_before_its_hello_is_killed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A drive cancelled (Ctrl-C) while a worker is still starting: the worker is nobody's
    yet — not in the pool, so not in its shutdown — and must not be left running."""
    from agentctl.coordinator import workerproc  # where the pool launches its workers

    marker = "agentctl-test-worker-that-never-says-hello"
    silent = [sys.executable, "-c", f"import time; time.sleep(60)  # {marker}"]
    monkeypatch.setattr(workerproc, "worker_argv", lambda _fd, _preload: silent)
    me = psutil.Process()

    async def started() -> int:
        while True:
            for child in me.children():
                with contextlib.suppress(psutil.Error):
                    if any(marker in part for part in child.cmdline()):
                        return child.pid
            await trio.sleep(0.02)

    async with open_worker_pool(1) as pool:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(pool.warm, 1)
                pid = await started()
                scope.cancel()
    assert _gone(pid)
