"""Operators' tuning knobs: defaults, values taken, and values refused with exit 2 before a
command does anything."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from agentctl import envknobs
from agentctl.coordinator.workerpool import WorkerPool
from agentctl.errors import ValidationError
from tests.conftest import EXAMPLES, Cli


def test_unset_or_empty_knobs_are_their_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(envknobs.FRAME_SPIN_US, raising=False)
    monkeypatch.setenv(envknobs.ANSWER_GRACE_SECONDS, " ")
    assert envknobs.frame_spin_us() == 150
    assert envknobs.answer_grace_s() == 10.0


def test_knobs_take_their_kind_of_number(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(envknobs.FRAME_SPIN_US, "0")
    monkeypatch.setenv(envknobs.ANSWER_GRACE_SECONDS, "0.25")
    assert envknobs.frame_spin_us() == 0
    assert envknobs.answer_grace_s() == 0.25


_REFUSED = [
    (envknobs.FRAME_SPIN_US, v) for v in ("abc", "-1", "1.5", "0x10", "1e3", "+5", "5_0", "٥")
] + [(envknobs.ANSWER_GRACE_SECONDS, v) for v in ("soon", "0", "-2", "nan", "inf", "١")]


@pytest.mark.parametrize(("name", "value"), _REFUSED)
def test_a_value_not_of_the_knobs_kind_is_refused(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    """Spin: whole microseconds, 0 or more; grace: seconds above 0 (finite)."""
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError, match=name):
        envknobs.check_all()


@pytest.mark.parametrize("name", [envknobs.FRAME_SPIN_US, envknobs.ANSWER_GRACE_SECONDS])
def test_the_cli_refuses_a_bad_knob_before_it_runs_anything(
    tmp_path: Path, cli: Cli, name: str
) -> None:
    """Exit 2 with the variable named, and no state written: not a silent default, not an
    internal error from deep inside a run."""
    (tmp_path / "hello.yaml").write_text((EXAMPLES / "hello.yaml").read_text())
    done = cli("--output", "json", "run", "hello.yaml", env={name: "abc"})
    assert done.rc == 2, done.stderr
    assert not done.stdout
    assert name in done.error["error"]["message"] and done.error["error"]["exitCode"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hello.yaml"]


def test_importing_the_pool_reads_no_knob() -> None:
    """A library user imports the pool under any environment; the knob is read when a pool
    is made (``test_workerpool``'s hung-worker tests set it so)."""
    env = {**os.environ, envknobs.ANSWER_GRACE_SECONDS: "nan"}
    code = "import agentctl.coordinator.workerpool"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


async def test_a_pool_made_under_a_bad_grace_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(envknobs.ANSWER_GRACE_SECONDS, "soon")
    async with trio.open_nursery() as nursery:
        with pytest.raises(ValidationError, match=f"{envknobs.ANSWER_GRACE_SECONDS}='soon'"):
            WorkerPool(1, nursery, None, None)
