"""Workers started before the run (``workerproc.prestart_workers``; ``workerstart.early_workers``
before the compile): adopted by the pool, or killed — never left behind — and a failing
``--preload`` breaks nothing."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
from registry_helpers import compile_text

from agentctl.coordinator.workerpool import open_worker_pool
from agentctl.coordinator.workerproc import prestart_workers
from agentctl.coordinator.workerstart import Prestarted, early_workers
from agentctl.mailbox import Result
from tests.coordinator.test_workerpool import _gone, _shell
from tests.wire_messages import execute_msg


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
            execute_msg("builtin.read", {"workspace": str(tmp_path), "path": "a.txt"})
        )
    assert isinstance(reply, Result), reply


SHELL_FLOW = """
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: early}
spec:
  policy: {approval: never, processAllowlist: ["true"]}
  actions:
    ok: {kind: builtin.shell.exec, command: /bin/true}
  tasks:
    - {id: one, uses: action:ok}
"""

# Names a worker kind in a comment only: the guess starts a worker the plan does not need.
PURE_FLOW = """
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: pure}
spec:
  actions:
    say: {kind: builtin.assign}  # not builtin.shell.exec
  tasks:
    - {id: one, uses: action:say, with: {x: 1}}
"""


def test_an_early_worker_is_adopted_by_the_prestart(tmp_path: Path) -> None:
    path = tmp_path / "wf.yaml"
    path.write_text(SHELL_FLOW)
    with early_workers(path, preview=False) as early:
        (pid,) = early.pids()
        assert early.preload == ("agentctl.workers.executors.shell",)
        _document, plan = compile_text(SHELL_FLOW)
        with prestart_workers(plan, preview=False, early=early) as prestarted:
            assert prestarted is early and prestarted.pids() == [pid]  # no second worker
    assert _gone(pid)


def test_an_early_worker_the_plan_does_not_need_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "wf.yaml"
    path.write_text(PURE_FLOW)
    with early_workers(path, preview=False) as early:
        (pid,) = early.pids()
        _document, plan = compile_text(PURE_FLOW)
        with prestart_workers(plan, preview=False, early=early) as prestarted:
            assert _gone(pid)
            assert prestarted.pids() == [] and prestarted.started == 0  # nothing to warm


def test_no_early_worker_for_a_preview_or_a_file_naming_no_worker_kind(tmp_path: Path) -> None:
    shell, pure = tmp_path / "shell.yaml", tmp_path / "pure.yaml"
    shell.write_text(SHELL_FLOW)
    pure.write_text(PURE_FLOW.replace("  # not builtin.shell.exec", ""))
    for path, preview in ((shell, True), (pure, False), (tmp_path / "missing.yaml", False)):
        with early_workers(path, preview=preview) as early:
            assert early.pids() == [] and early.started == 0


def test_a_workflow_piped_in_is_left_for_the_compile_to_read() -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, SHELL_FLOW.encode())
    os.close(write_end)
    try:
        with early_workers(Path(f"/dev/fd/{read_end}"), preview=False) as early:
            assert early.pids() == []  # not guessed from: the text stays in the pipe
            assert os.read(read_end, 65536) == SHELL_FLOW.encode()
    finally:
        os.close(read_end)
