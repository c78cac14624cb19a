"""A worker's start-up: its command line, and the start-up code cache it shares with the CLI.

A worker leaves with ``os._exit`` (no ``atexit`` handler runs), so it saves the store of
compiled dataclass and attrs methods itself — and only when it compiled something new.
"""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentctl import dataclass_codes
from agentctl.mailbox import Execute, Result
from agentctl.workers.__main__ import _parse
from tests.worker_process import open_worker


def _stored(cache: Path) -> Path:
    return cache / "agentctl" / dataclass_codes.FILE_NAME


async def _one_effect(cache: Path, ws: Path) -> None:
    async with open_worker({"XDG_CACHE_HOME": str(cache)}) as worker:
        request = {"workspace": str(ws), "writableRoots": ["out"], "path": "out/a.txt"}
        msg = Execute(
            effect_id="e1",
            run_id="run-1",
            task_id="t",
            attempt=1,
            operation="builtin.write",
            request={**request, "content": "x"},
            timeout_seconds=60,
        )
        assert isinstance(await worker.call(msg), Result)


async def test_a_worker_saves_what_it_compiled_and_reuses_it(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    await _one_effect(cache, tmp_path)  # an empty cache: everything compiled, then saved
    saved = _stored(cache)
    content = saved.read_bytes()
    assert content.startswith(dataclass_codes.KEY)
    entries = marshal.loads(content[len(dataclass_codes.KEY) :])
    assert len(entries) > 50  # trio's attrs classes and the wire models' dataclasses at least
    before = saved.stat()
    await _one_effect(cache, tmp_path)  # all found in the store: nothing new, nothing written
    after = saved.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


@pytest.mark.parametrize(
    ("argv", "parsed"),
    [
        (["--fd", "7"], (7, ())),
        (["--fd", "7", "--preload", "a.b", "--preload", "c"], (7, ("a.b", "c"))),
        (["--preload", "a.b", "--fd", "7"], (7, ("a.b",))),
        (["--fd=7", "--preload=a.b"], (7, ("a.b",))),  # argparse's other spellings
    ],
)
def test_the_command_line(argv: list[str], parsed: tuple[int, tuple[str, ...]]) -> None:
    assert _parse(argv) == parsed


@pytest.mark.parametrize(
    "argv", [[], ["--fd"], ["--fd", "x"], ["--fd", "\u00b2"], ["--preload", "a"], ["--bogus"]]
)
def test_a_wrong_command_line_is_a_usage_error(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _parse(argv)
    assert exited.value.code == 2


def test_a_worker_that_cannot_start_says_why_in_one_line(tmp_path: Path) -> None:
    """A descriptor that is not open (the coordinator's socket missing): exit 1 with one line
    naming the error, not a traceback on the user's terminal."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "agentctl.workers", "--fd", "987"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentctl worker ") and "OSError" in lines[0]
