"""Workers started before the run (``workerproc.prestart_workers``): adopted by the pool, or
killed — never left behind — and a failing ``--preload`` breaks nothing."""

from __future__ import annotations

from pathlib import Path

import psutil

from agentctl.coordinator.workerpool import open_worker_pool
from agentctl.coordinator.workerproc import Prestarted
from agentctl.mailbox import Result
from tests.coordinator.test_workerpool import _exec, _gone, _shell


def test_unadopted_workers_are_killed_and_reaped() -> None:
    prestarted = Prestarted(())
    prestarted.start()
    prestarted.start()
    pids = prestarted.pids()
    assert len(pids) == 2 and all(psutil.pid_exists(pid) for pid in pids)
    prestarted.close()
    assert all(_gone(pid) for pid in pids)
    assert prestarted.pids() == [] and prestarted.take() is None


async def test_the_pool_adopts_a_prestarted_worker(tmp_path: Path) -> None:
    prestarted = Prestarted(["agentctl.workers.executors.shell"])
    prestarted.start()
    (pid,) = prestarted.pids()
    try:
        async with open_worker_pool(1, prestarted=prestarted) as pool:
            reply = await pool.execute(_shell(tmp_path, 'echo "$PPID"'))
            assert pool.worker_pids() == [pid]
        assert isinstance(reply, Result), reply
        assert reply.output["stdout"].strip() == str(pid)  # the command ran in that worker
        assert prestarted.pids() == []
    finally:
        prestarted.close()
    assert _gone(pid)  # the pool stopped it


async def test_a_preload_that_fails_leaves_the_worker_working(tmp_path: Path) -> None:
    preload = ["agentctl.no_such_module", "agentctl.workers.executors.files"]
    async with open_worker_pool(1, preload=preload) as pool:
        (tmp_path / "a.txt").write_text("hi")
        reply = await pool.execute(
            _exec("builtin.read", {"workspace": str(tmp_path), "path": "a.txt"})
        )
    assert isinstance(reply, Result), reply
