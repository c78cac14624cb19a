"""Workers forked from a coordinator that already has their imports (ADR 0017,
``coordinator.workerfork``): each test drives a run in a fresh interpreter
(``fork_driver.py``), whose one task reports on the worker it ran in."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

DRIVER = Path(__file__).with_name("fork_driver.py")
REPO = Path(__file__).resolve().parents[2]
SIGTERM_BIT = 1 << (signal.SIGTERM - 1)


def _run_driver(tmp_path: Path, mode: str) -> subprocess.CompletedProcess[str]:
    """``fork_driver.py`` in a fresh interpreter that can import this repository's tests (a
    registered test kind's executor lives there)."""
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *path])}
    return subprocess.run(
        [sys.executable, str(DRIVER), str(tmp_path), mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=env,
    )


def _drive(tmp_path: Path, mode: str) -> list[dict[str, str]]:
    """The probe task's report of each run: the worker's command line, session, descriptors,
    caught signals and pid."""
    lines = [json.loads(line) for line in _run_driver(tmp_path, mode).stdout.splitlines()]
    reports = []
    for line in lines[1:]:
        assert line["state"] == "succeeded", line
        cmdline, session, fds, sigcgt, pid = line["output"]["probe"].splitlines()
        reports.append(
            {"cmdline": cmdline, "session": session, "fds": fds, "sigcgt": sigcgt, "pid": pid}
        )
    return reports


def _kinds(fds: str) -> list[str]:
    """The worker's descriptors with the numbers of pipes, sockets and inodes left out."""
    return sorted(re.sub(r"\[\d+\]", "", fd) for fd in fds.split())


def test_a_quiet_coordinator_forks_a_worker_that_holds_only_what_an_execed_one_does(
    tmp_path: Path,
) -> None:
    (tmp_path / "fork").mkdir()
    (tmp_path / "exec").mkdir()
    (forked,) = _drive(tmp_path / "fork", "plain")
    (execed,) = _drive(tmp_path / "exec", "thread")
    assert str(DRIVER) in forked["cmdline"] and "agentctl.workers" not in forked["cmdline"]
    assert "-m agentctl.workers" in execed["cmdline"]  # a thread of the driver's was alive
    for worker in (forked, execed):
        assert worker["session"] == worker["pid"]  # its own session, as start_new_session
        assert "kept-open.txt" not in worker["fds"]  # the coordinator's files stay its own
        # The driver's Python SIGTERM handler is not the worker's: SIGTERM kills it.
        assert not int(worker["sigcgt"].split()[1], 16) & SIGTERM_BIT
    assert _kinds(forked["fds"]) == _kinds(execed["fds"])


def test_a_second_run_forks_too_past_trios_idle_threads(tmp_path: Path) -> None:
    first, second = _drive(tmp_path, "twice")
    assert str(DRIVER) in first["cmdline"] and str(DRIVER) in second["cmdline"]
    assert first["pid"] != second["pid"]


def test_a_forked_worker_whose_coordinator_dies_exits_and_kills_its_effect(
    tmp_path: Path,
) -> None:
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), str(tmp_path), "hang"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        driver = psutil.Process(json.loads(proc.stdout.readline())["driver"])
        sleeper = _wait_for_sleep(driver)
        worker = sleeper.parent()
        assert worker is not None and worker.cmdline() == driver.cmdline()  # forked
    finally:
        proc.kill()
        proc.wait()
    _gone, alive = psutil.wait_procs([worker, sleeper], timeout=20)
    assert alive == [], alive  # EOF on its socket: the worker cancelled its effect and left


def _wait_for_sleep(driver: psutil.Process) -> psutil.Process:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for child in driver.children(recursive=True):
            if child.name() == "sleep":
                return child
        time.sleep(0.05)
    raise AssertionError("the run's sleep never started")


def test_a_forked_worker_has_none_of_the_coordinators_logging_handlers(tmp_path: Path) -> None:
    # The driver logs to app.log; its handler's descriptor is closed in the worker, whose own
    # sockets may take that number next — so the worker must not write through it.
    done = _run_driver(tmp_path, "logging")
    result = json.loads(done.stdout.splitlines()[1])
    assert result["state"] == "succeeded", result
    state = result["output"]["state"]
    assert str(DRIVER) in state["argv"]  # forked: the driver's command line
    assert state["handlers"] == []
    assert "logged in the worker" not in (tmp_path / "app.log").read_text()
    assert "logged in the worker" in done.stderr  # a fresh interpreter's last-resort handler
