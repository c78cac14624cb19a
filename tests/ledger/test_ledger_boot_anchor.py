"""The boot anchor file: the first publisher wins and every process agrees with it; a file
that cannot be trusted is not read, and the reading falls back to the current btime."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from agentctl.ledger import boot_anchor
from agentctl.ledger.owners import TOLERANCE_S, process_start_time
from tests.ledger.owner_fixtures import FakeBoot, fake_boot

__all__ = ["fake_boot"]

_RACER = """
import os, sys, time
from agentctl.ledger import boot_anchor as b
b.BTIME_PATH, b.ANCHOR_DIRS = sys.argv[1], (sys.argv[2],)
open(sys.argv[3], "w").close()
while not os.path.exists(sys.argv[4]):
    time.sleep(0.001)
print(b.boot_anchor())
"""


def _wait_for(paths: list[Path]) -> None:
    deadline = time.monotonic() + 120
    while not all(p.exists() for p in paths):
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_processes_racing_to_publish_agree_on_one_anchor(fake_boot: FakeBoot) -> None:
    """Each racer sees another btime (as if the clock stepped between them); all of them
    come out with the one value that was published first."""
    text = fake_boot.stat.read_text()
    go, racers, ready = fake_boot.anchors.parent / "go", [], []
    for i in range(6):
        stat = fake_boot.anchors.parent / f"stat-{i}"
        stat.write_text(text.replace(f"btime {fake_boot.btime}", f"btime {fake_boot.btime + i}"))
        ready.append(fake_boot.anchors.parent / f"ready-{i}")
        args = [str(stat), str(fake_boot.anchors), str(ready[-1]), str(go)]
        racers.append(
            subprocess.Popen([sys.executable, "-c", _RACER, *args], stdout=subprocess.PIPE)
        )
    _wait_for(ready)
    go.touch()
    seen = {float(racer.communicate()[0]) for racer in racers}
    assert len(seen) == 1
    assert seen <= {float(fake_boot.btime + i) for i in range(6)}
    published = fake_boot.anchor_file(os.geteuid()).read_text()
    assert published == f"{int(seen.pop())}\n"
    assert list(fake_boot.anchors.iterdir()) == [fake_boot.anchor_file(os.geteuid())]


def test_the_first_writer_wins_and_a_loser_reads_its_value(fake_boot: FakeBoot) -> None:
    path = fake_boot.anchor_file(os.geteuid())
    path.write_text(f"{fake_boot.btime - 13}\n")
    assert boot_anchor.boot_anchor() == fake_boot.btime - 13
    boot_anchor._publish(str(path), fake_boot.btime)  # a loser of the race
    assert path.read_text() == f"{fake_boot.btime - 13}\n"
    assert list(fake_boot.anchors.iterdir()) == [path]  # its private copy is gone


@pytest.mark.parametrize(
    "content", [b"", b"1796202393", b"17962x3\n", b"1796202393\n1\n", b" 1796202393\n"]
)
def test_a_corrupt_or_partial_anchor_is_not_trusted(fake_boot: FakeBoot, content: bytes) -> None:
    fake_boot.anchor_file(os.geteuid()).write_bytes(content)
    _assert_falls_back_to_the_current_btime(fake_boot)
    assert fake_boot.anchor_file(os.geteuid()).read_bytes() == content  # not repaired


def test_an_anchor_others_could_rewrite_is_not_trusted(fake_boot: FakeBoot) -> None:
    path = fake_boot.anchor_file(os.geteuid())
    path.write_text(f"{fake_boot.btime - 13}\n")
    path.chmod(0o666)
    _assert_falls_back_to_the_current_btime(fake_boot)


def test_a_symlink_planted_as_the_anchor_is_not_followed(fake_boot: FakeBoot) -> None:
    target = fake_boot.anchors.parent / "elsewhere"
    target.write_text(f"{fake_boot.btime - 13}\n")
    fake_boot.anchor_file(os.geteuid()).symlink_to(target)
    _assert_falls_back_to_the_current_btime(fake_boot)


_READER = """
import sys
from agentctl.ledger import boot_anchor as b
b.BTIME_PATH, b.ANCHOR_DIRS = sys.argv[1], (sys.argv[2],)
print(b.boot_anchor(), b.user_anchor(int(sys.argv[3])))
"""


def test_a_fifo_planted_as_the_anchor_is_refused_without_blocking(fake_boot: FakeBoot) -> None:
    """Anyone can create a FIFO in /dev/shm; opening one blocks until a writer comes. In a
    subprocess with a timeout, so that the regression fails instead of hanging the suite."""
    os.mkfifo(fake_boot.anchor_file(os.geteuid()))
    args = [str(fake_boot.stat), str(fake_boot.anchors), str(os.geteuid())]
    done = subprocess.run(
        [sys.executable, "-c", _READER, *args], capture_output=True, text=True, timeout=20
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "None"]


@pytest.mark.skipif(os.geteuid() != 0, reason="plants a file owned by another user")
def test_an_anchor_of_another_owner_is_not_trusted(fake_boot: FakeBoot) -> None:
    path = fake_boot.anchor_file(os.geteuid())
    path.write_text(f"{fake_boot.btime - 13}\n")
    os.chown(path, 65534, 65534)
    _assert_falls_back_to_the_current_btime(fake_boot)


def test_an_anchor_of_an_earlier_boot_is_not_read(
    fake_boot: FakeBoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_boot.anchor_file(os.geteuid()).write_text(f"{fake_boot.btime - 86400}\n")
    boot_id = fake_boot.anchors.parent / "boot_id"
    boot_id.write_text("0f0f0f0f-0000-4000-8000-000000000000\n")
    monkeypatch.setattr(boot_anchor, "BOOT_ID_PATH", str(boot_id))
    assert boot_anchor.boot_anchor() == fake_boot.btime
    assert fake_boot.anchor_file(os.geteuid()).name.endswith("0f0f0f0f-0000-4000-8000-000000000000")


@pytest.mark.parametrize("missing", ["BOOT_ID_PATH", "ANCHOR_DIRS"])
def test_without_a_boot_id_or_a_folder_there_is_no_anchor(
    fake_boot: FakeBoot, monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    nowhere = str(fake_boot.anchors.parent / "nowhere")
    monkeypatch.setattr(boot_anchor, missing, nowhere if missing == "BOOT_ID_PATH" else (nowhere,))
    _assert_falls_back_to_the_current_btime(fake_boot)


def _assert_falls_back_to_the_current_btime(fake_boot: FakeBoot) -> None:
    """No anchor: the reading is the old formula's (psutil's), which follows a clock step."""
    assert boot_anchor.boot_anchor() is None
    me = os.getpid()
    before = process_start_time(me)
    assert abs(before - psutil.Process(me).create_time()) < TOLERANCE_S
    fake_boot.step(13)
    assert abs(process_start_time(me) - psutil.Process(me).create_time()) < TOLERANCE_S
    assert abs(process_start_time(me) - before - 13) < TOLERANCE_S
