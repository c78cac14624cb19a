"""A shell effect's child in a real run: it inherits no descriptor of its worker (the
worker's socket to the coordinator above all) but its three standard streams, and a command
that cannot start fails the run with the system's reason."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

HEAD = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: spawned }
spec:
  policy: { approval: never, processAllowlist: [ls, prog] }
"""

LIST_FDS = """\
  actions: { fds: { kind: builtin.shell.exec, command: /bin/ls, args: [/proc/self/fd] } }
  tasks: [ { id: fds, uses: "action:fds" } ]
"""


def test_the_child_inherits_only_its_standard_streams(  # type: ignore[no-untyped-def]
    cli, write_workflow: Callable[[str], Path], tmp_path: Path
) -> None:
    wf = write_workflow(HEAD + LIST_FDS)
    done = cli("--output", "json", "run", str(wf), "--db", str(tmp_path / "r.db"))
    assert done.rc == 0, done.stderr
    fds = sorted(int(name) for name in done.data["output"]["fds"]["stdout"].split())
    assert fds == [0, 1, 2, 3]  # 3: ls's own handle on the listed directory


@pytest.mark.parametrize("case", ["missing", "not_executable", "directory"])
def test_a_command_that_cannot_start_fails_the_run(  # type: ignore[no-untyped-def]
    cli, write_workflow: Callable[[str], Path], tmp_path: Path, case: str
) -> None:
    prog = tmp_path / "bin" / "prog"
    prog.parent.mkdir()
    if case == "not_executable":
        prog.write_text("#!/bin/sh\n")
    elif case == "directory":
        prog.mkdir()
    action = f'{{ kind: builtin.shell.exec, command: "{prog}" }}'
    wf = write_workflow(
        HEAD + f'  actions: {{ p: {action} }}\n  tasks: [ {{ id: p, uses: "action:p" }} ]\n'
    )
    done = cli("--output", "json", "run", str(wf), "--db", str(tmp_path / "r.db"))
    assert done.rc == 4, done.stderr
    reason = os.strerror(2 if case == "missing" else 13)
    assert f"cannot start process 'prog': {reason}" in done.error["error"]["message"]
