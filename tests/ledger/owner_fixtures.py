"""A private boot anchor and a fake ``/proc/stat`` for the owner tests: a clock step is
simulated by moving the fake file's ``btime``, the machine's clock is never touched. psutil's
boot time is read from the fake file too, so psutil's readings (what older agentctl wrote
and checked with) move with the step as they would on a real one. That patches
``psutil._pslinux.boot_time``, a psutil internal: a psutil release that reads the boot time
elsewhere would make the psutil comparisons in these tests fail, not pass wrongly."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentctl.ledger import boot_anchor


@dataclass(frozen=True)
class FakeBoot:
    """The fake ``/proc/stat`` (its btime as it was at the start) and the anchor folder."""

    stat: Path
    anchors: Path
    btime: int

    def step(self, seconds: int) -> None:
        """The kernel's view after the wall clock was stepped by ``seconds``."""
        text = Path("/proc/stat").read_text()
        self.stat.write_text(
            re.sub(r"^btime \d+$", f"btime {self.btime + seconds}", text, flags=re.M)
        )

    def anchor_file(self, uid: int) -> Path:
        path = boot_anchor.anchor_path(uid)
        assert path is not None
        return Path(path)


@pytest.fixture
def fake_boot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeBoot]:
    anchors = tmp_path / "shm"
    anchors.mkdir()
    boot = FakeBoot(tmp_path / "stat", anchors, int(boot_anchor.read_btime()))
    boot.step(0)
    monkeypatch.setattr(boot_anchor, "BTIME_PATH", str(boot.stat))
    monkeypatch.setattr(boot_anchor, "ANCHOR_DIRS", (str(anchors),))
    if sys.platform == "linux":
        import psutil._pslinux

        monkeypatch.setattr(psutil._pslinux, "boot_time", boot_anchor.read_btime)
    boot_anchor.boot_anchor.cache_clear()
    yield boot
    boot_anchor.boot_anchor.cache_clear()


def sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
