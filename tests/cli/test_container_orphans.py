"""A container a crashed run left running is removed before anyone judges its effect.

The coordinator, its worker and the engine client are SIGKILLed together (an OOM or cgroup
kill): the engine keeps the container running, detached from all of them. The next
`resume` (which stops at the now uncertain effect), `effects reconcile` of that effect, or
`cancel` of the crashed run force-removes it, so no verdict is overtaken by what it judged
and nothing is left running for ever.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.cli.test_policy_and_sandbox import HEAD, _podman_image
from tests.conftest import Cli, StartCli

FOREVER = (
    HEAD
    + """\
  policy: { approval: never, processAllowlist: [sh] }
  actions:
    spin:
      kind: builtin.shell.exec
      command: /bin/sh
      args: ["-c", "while true; do sleep 1; done"]
      timeoutSeconds: 3600
      isolation: container
      container: { image: "IMAGE", runtime: podman }
  tasks: [ { id: spin, uses: "action:spin" } ]
"""
)


def _containers(name: str, *, running: bool = False) -> list[str]:
    """The containers called ``name``: only a running one, or in any state."""
    every = [] if running else ["-a"]
    listed = subprocess.run(
        ["podman", "ps", *every, "--filter", f"name=^{name}$", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return listed.stdout.split()


def _argv(proc: psutil.Process) -> list[str]:
    """``proc``'s command line; none for one already gone (an engine probe that ended)."""
    try:
        return proc.cmdline()
    except psutil.Error:
        return []


def _engine_client(
    proc: subprocess.Popen[str], deadline: float
) -> tuple[list[psutil.Process], str]:
    """The coordinator's process tree once its container runs, and the container's name."""
    top = psutil.Process(proc.pid)
    while True:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no container started"
        tree = [top, *top.children(recursive=True)]
        names = [a for p in tree for a in _argv(p) if a.startswith("agentctl-")]
        if names and _containers(names[0], running=True):
            return tree, names[0]
        time.sleep(0.1)


@pytest.mark.container
@pytest.mark.sqlite_only(reason="the container's clean-up is the subject; one backend suffices")
@pytest.mark.parametrize("verdict", ["resume", "reconcile", "cancel"])
def test_a_container_a_crashed_run_left_is_removed_before_any_verdict(
    cli: Cli, start_cli: StartCli, write_workflow, tmp_path: Path, verdict: str
) -> None:  # type: ignore[no-untyped-def]
    wf = _forever(write_workflow)
    db = ("--db", str(tmp_path / "r.db"))
    proc = start_cli("--output", "json", "run", str(wf), *db)
    with _crashed(proc) as name:
        run_id = cli("--output", "json", "runs", "list", *db).data["runs"][0]["runId"]
        if verdict == "resume":
            assert cli("--output", "json", "resume", run_id, *db).rc == 3
        elif verdict == "reconcile":  # straight after the crash: the effect is still started
            [effect] = cli("--output", "json", "effects", "list", run_id, *db).data["effects"]
            why = ("--status", "not-applied", "--reason", "it was stopped")
            done = cli("effects", "reconcile", effect["effectId"], *why, *db)
            assert done.rc == 0, done.stderr
        else:
            assert cli("--output", "json", "cancel", run_id, *db).rc == 0
        assert _containers(name) == []


def _kill_tree(tree: list[psutil.Process]) -> None:
    """SIGKILL a coordinator's whole tree at once: none lives to clean up after the others."""
    for p in tree:
        with contextlib.suppress(psutil.Error):
            p.kill()


def _forever(write_workflow) -> Path:  # type: ignore[no-untyped-def]
    """The workflow whose one container runs for ever (skip where podman cannot run it)."""
    image = _podman_image()
    if image is None:
        pytest.skip("podman or localhost/agentctl-test:1 missing (run scripts/setup-system.sh)")
    wf: Path = write_workflow(FOREVER.replace("IMAGE", image))
    return wf


@contextlib.contextmanager
def _crashed(proc: subprocess.Popen[str]) -> Iterator[str]:
    """Once ``proc``'s container runs, SIGKILL its whole tree and yield the container's name,
    still running; afterwards, pass or fail, the coordinator is stopped and the container gone."""
    name = ""
    try:
        tree, name = _engine_client(proc, time.monotonic() + 120)
        _kill_tree(tree)
        proc.communicate(timeout=60)
        assert _containers(name, running=True), "the engine keeps it past its client"
        yield name
    finally:
        if proc.poll() is None:  # failed before the kill: its worker removes the container
            proc.terminate()
            proc.communicate(timeout=60)
        if name:
            subprocess.run(["podman", "rm", "-f", "--time=0", name], capture_output=True)


LEASE_S = 1.0


@pytest.mark.container
@pytest.mark.sqlite_only(reason="the container's clean-up is the subject; one backend suffices")
@pytest.mark.parametrize("verdict", ["takeover", "cancelled-takeover", "reconcile"])
def test_a_container_a_dead_serve_left_is_removed_by_the_takeover_or_a_reconcile(
    cli: Cli, start_cli: StartCli, write_workflow, tmp_path: Path, verdict: str
) -> None:  # type: ignore[no-untyped-def]
    """A ``serve`` dies with its worker and engine client; its lease expires. The ``serve``
    that takes the run over (handing it back blocked, or cancelling it for the flag set
    meanwhile) and ``effects reconcile`` of the still ``started`` effect — an expired lease
    is no live driver — remove the container it left."""
    wf = _forever(write_workflow)
    db = ("--db", str(tmp_path / "r.db"))
    run_id = cli("--output", "json", "submit", str(wf), *db).data["runId"]
    proc = start_cli("serve", "--once", "--lease-seconds", str(LEASE_S), *db)
    with _crashed(proc) as name:
        time.sleep(LEASE_S + 0.5)  # no heartbeat renews the dead serve's lease: it expires
        if verdict == "reconcile":
            [effect] = cli("--output", "json", "effects", "list", run_id, *db).data["effects"]
            assert effect["status"] == "started"  # no claim judged it yet
            why = ("--status", "not-applied", "--reason", "its serve died")
            done = cli("effects", "reconcile", effect["effectId"], *why, *db)
            assert done.rc == 0, done.stderr
        else:
            if verdict == "cancelled-takeover":  # only flagged: a serve lease holds the run
                assert cli("--output", "json", "cancel", run_id, *db).rc == 0
            report = cli("--output", "json", "serve", "--once", *db).data
            [claimed] = report["runs"]
            ended = "blocked" if verdict == "takeover" else "cancelled"
            assert (claimed["runId"], claimed["state"], claimed["takeover"]) == (
                run_id,
                ended,
                True,
            )
            assert "not removed" not in claimed["error"]
        assert _containers(name) == []
