"""The worker registry across a wall-clock step (simulated: a fake ``/proc/stat`` whose btime
moves): its processes are read as lease owners are, so a live coordinator's registry is left
alone and a dead one's workers are still found."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from agentctl.coordinator.workerproc import kill_stale_workers
from agentctl.ledger.owners import process_start_time
from tests.ledger.owner_fixtures import FakeBoot, fake_boot, sleeper

__all__ = ["fake_boot"]


def _registry(tmp_path: Path, coordinator: int, worker: int) -> Path:
    path = tmp_path / "workers.json"
    data = {
        "version": 1,
        "coordinator": {"pid": coordinator, "createTime": process_start_time(coordinator)},
        "workers": [{"pid": worker, "createTime": process_start_time(worker)}],
    }
    path.write_text(json.dumps(data))
    return path


def test_a_live_coordinators_registry_survives_a_step(tmp_path: Path, fake_boot: FakeBoot) -> None:
    coordinator, worker = sleeper(), sleeper()
    try:
        registry = _registry(tmp_path, coordinator.pid, worker.pid)
        fake_boot.step(13)
        assert kill_stale_workers(str(registry)) == []
        assert registry.exists()
        assert worker.poll() is None
    finally:
        for proc in (coordinator, worker):
            proc.kill()
            proc.wait()


def test_a_dead_coordinators_workers_are_killed_after_a_step(
    tmp_path: Path, fake_boot: FakeBoot
) -> None:
    coordinator, worker = sleeper(), subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        registry = _registry(tmp_path, coordinator.pid, worker.pid)
        coordinator.kill()
        coordinator.wait()
        fake_boot.step(-13)
        assert kill_stale_workers(str(registry)) == [worker.pid]
        assert not Path(f"/proc/{worker.pid}").exists()  # killed and reaped
        assert not registry.exists()
    finally:
        worker.kill()
        worker.wait()
