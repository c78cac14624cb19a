"""``--color`` on the outcome line of the commands that run: ``run``, ``resume`` and the
recovery runs colour their state word as ``inspect`` does (``--color always``, or ``auto`` on
a terminal), and never put an ANSI byte in output that is not a terminal or with ``never``."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import EXAMPLES, Cli

GREEN, RESET = "\x1b[32m", "\x1b[0m"


def test_the_run_outcome_colours_its_state_only_when_asked(cli: Cli, tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "e1-dataflow.yaml", tmp_path / "wf.yaml")
    coloured = cli("--color", "always", "run", "wf.yaml", "--db", "r.db")
    assert coloured.rc == 0, coloured.stderr
    head = coloured.stdout.splitlines()[0]
    assert head.startswith("run run-") and head.endswith(f": {GREEN}succeeded{RESET}"), head
    for args in (("--color", "never"), ()):  # never; auto with stdout a pipe
        plain = cli(*args, "run", "wf.yaml", "--db", "r.db")
        assert plain.rc == 0 and "\x1b" not in plain.stdout + plain.stderr
        assert plain.stdout.splitlines()[0].endswith(": succeeded")
    source = plain.stdout.split()[1].rstrip(":")
    again = ("retry", "wf.yaml", source, "--from", "gate", "--restart-successful", "--db", "r.db")
    retried = cli("--color", "always", *again)
    assert retried.rc == 0, retried.stderr
    assert f": {GREEN}succeeded{RESET}  (from {source})" in retried.stdout.splitlines()[0]
