"""Shared fixtures: the CLI as a black box, run as a real subprocess in a temporary directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


@dataclass
class CliResult:
    rc: int
    stdout: str
    stderr: str

    @property
    def data(self) -> Any:
        """The ``data`` of the success envelope on stdout."""
        return json.loads(self.stdout)["data"]

    @property
    def error(self) -> Any:
        """The error envelope on stderr."""
        return json.loads(self.stderr.strip().splitlines()[-1])


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCTL_")}
    env.update(extra or {})
    return env


def agentctl_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentctl", *args]


Cli = Callable[..., CliResult]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """Run ``agentctl ARGS`` in ``tmp_path`` (or ``cwd``) and capture everything."""

    def run(
        *args: str,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 120,
        stdin: str | None = None,
    ) -> CliResult:
        proc = subprocess.run(
            agentctl_argv(*args),
            cwd=cwd or tmp_path,
            env=cli_env(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
        )
        return CliResult(proc.returncode, proc.stdout, proc.stderr)

    return run


@pytest.fixture
def write_workflow(tmp_path: Path) -> Callable[[str, str], Path]:
    def write(text: str, name: str = "wf.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write
