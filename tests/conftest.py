"""Shared fixtures: the CLI as a black box, run as a real subprocess in a temporary directory.

``cli`` runs on the ledger backend of the ``backend`` fixture: SQLite here; tests/cli/conftest.py
parametrizes it over SQLite and PostgreSQL (see tests/clibackend.py and tests/pgserver.py).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.clibackend import LedgerTarget, PgLedgerTarget, agentctl_argv, cli_env
from tests.pgserver import PgServer, pg_database, pg_server

__all__ = ["agentctl_argv", "cli_env", "pg_database", "pg_server"]
REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"

# Hypothesis checks what a property holds, never how fast: its default 200 ms deadline per
# example and its too-slow health check measure the machine, and under pytest-xdist (more
# workers than CPUs, CLI subprocesses beside them) a descheduled example would fail a
# property that holds. Both off for every test; the examples and their checks are unchanged.
settings.register_profile("agentctl", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("agentctl")


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


Cli = Callable[..., CliResult]


@pytest.fixture
def backend() -> str:
    """The ledger backend the CLI runs on (tests/cli parametrizes it)."""
    return "sqlite"


@pytest.fixture
def ledger_target(backend: str, request: pytest.FixtureRequest) -> Iterator[LedgerTarget]:
    """How this test's CLI processes reach their ledger on ``backend``."""
    if backend == "sqlite":
        target = LedgerTarget()
    else:
        server: PgServer = request.getfixturevalue("pg_server")
        target = PgLedgerTarget(server)
    try:
        yield target
    finally:
        target.close()


@pytest.fixture
def cli(tmp_path: Path, ledger_target: LedgerTarget) -> Cli:
    """Run ``agentctl ARGS`` in ``tmp_path`` (or ``cwd``) on the test's backend."""

    def run(
        *args: str,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 120,
        stdin: str | None = None,
    ) -> CliResult:
        where = cwd or tmp_path
        how = ledger_target.invocation(args, where, env)
        proc = subprocess.run(
            how.argv,
            cwd=where,
            env=how.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
        )
        return CliResult(proc.returncode, proc.stdout, proc.stderr)

    return run


StartCli = Callable[..., "subprocess.Popen[str]"]


@pytest.fixture
def start_cli(tmp_path: Path, ledger_target: LedgerTarget) -> StartCli:
    """Start ``agentctl ARGS`` in the background on the test's backend (pipes, text, no stdin);
    keyword arguments other than ``cwd`` and ``env`` go to ``subprocess.Popen``."""

    def start(
        *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, **popen: Any
    ) -> subprocess.Popen[str]:
        where = cwd or tmp_path
        how = ledger_target.invocation(args, where, env)
        options: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        options.update(popen)
        return subprocess.Popen(
            how.argv, cwd=where, env=how.env, stdin=subprocess.DEVNULL, text=True, **options
        )

    return start


@pytest.fixture
def write_workflow(tmp_path: Path) -> Callable[[str, str], Path]:
    def write(text: str, name: str = "wf.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write
