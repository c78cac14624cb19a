"""What a person at a real terminal sees while a run is driven.

- ``--color never``: not one ANSI byte (spec/cli.md §2). The live progress view on stderr
  redraws with cursor movement and styles, which are ANSI bytes whatever the colour setting.
- the first line names the run's whole id and this invocation's trace (``resume`` too: it
  mints a new trace, spec/cli.md §5).

The CLI runs here as a subprocess whose stdout and stderr are the slave side of a
pseudo-terminal, so ``isatty()`` is true as it is for that person.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.clibackend import LedgerTarget
from tests.conftest import EXAMPLES, Cli

WORKFLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: tty }
spec:
  policy: { approval: never }
  actions:
    put: { kind: builtin.assign }
  tasks:
    - { id: first, uses: "action:put", with: { v: 1 } }
    - { id: second, uses: "action:put", needs: [first], with: { v: 2 } }
"""


def _at_terminal(target: LedgerTarget, cwd: Path, args: tuple[str, ...]) -> tuple[int, bytes]:
    """Run ``agentctl ARGS`` with stdout and stderr on a pty; its exit code and every byte."""
    how = target.invocation(args, cwd, None)
    master, slave = os.openpty()
    proc = subprocess.Popen(how.argv, cwd=cwd, env=how.env, stdout=slave, stderr=slave)
    os.close(slave)
    seen = b""
    try:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: every holder of the slave side closed it
                break
            if not chunk:
                break
            seen += chunk
        rc = proc.wait(timeout=120)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return rc, seen


@pytest.mark.parametrize("command", ["run", "fork"])
def test_color_never_writes_no_ansi_bytes_while_a_run_is_driven(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path, command: str
) -> None:
    (tmp_path / "wf.yaml").write_text(WORKFLOW, encoding="utf-8")
    args: tuple[str, ...] = ("run", "wf.yaml", "--db", "r.db")
    if command == "fork":
        source = cli("--output", "json", *args).data["runId"]
        args = ("fork", source, "--db", "r.db")
    rc, seen = _at_terminal(ledger_target, tmp_path, ("--color", "never", *args))
    assert rc == 0, seen
    assert b"\x1b" not in seen, seen
    assert b": succeeded" in seen
    assert b"run " in seen.split(b"\n")[0]  # the run id is still announced first


def test_the_live_view_is_shown_at_a_terminal_by_default(
    ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    # The control for the test above: at a terminal the progress view is drawn.
    (tmp_path / "wf.yaml").write_text(WORKFLOW, encoding="utf-8")
    rc, seen = _at_terminal(ledger_target, tmp_path, ("run", "wf.yaml", "--db", "r.db"))
    assert rc == 0, seen
    assert b"\x1b[" in seen


def test_resume_at_a_terminal_names_the_whole_run_id_and_its_new_trace(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    shutil.copy(EXAMPLES / "e6-approval.yaml", tmp_path / "wf.yaml")  # pauses for approval
    paused = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert paused.rc == 3, paused.stderr
    run_id, first_trace = paused.data["runId"], paused.data["traceId"]
    args = ("--color", "never", "resume", run_id[:14], "--db", "r.db")  # by a prefix
    rc, seen = _at_terminal(ledger_target, tmp_path, args)
    assert rc == 3, seen
    title = seen.decode().splitlines()[0]
    assert title.startswith(f"run {run_id}  (trace trace-"), title
    assert first_trace not in title and "resumed" not in title


ESCAPING = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: esc }
spec:
  policy: { approval: never, processAllowlist: [sh] }
  actions:
    f:
      kind: builtin.shell.exec
      command: /bin/sh
      args: ["-c", "printf 'bad \\\\033[2Jcleared\\\\r\\\\033[31mred' >&2; exit 3"]
  tasks:
    - { id: f, uses: "action:f" }
"""


def test_stored_control_bytes_are_shown_escaped_never_sent_to_the_terminal(
    cli: Cli, tmp_path: Path
) -> None:
    """A process's stderr (kept in the error) and an operator's reason are stored text: human
    output shows their control bytes as escapes, so they cannot clear or rewrite the screen;
    with colour on, only agentctl's own colour sequences are written."""
    (tmp_path / "wf.yaml").write_text(ESCAPING)
    ran = cli("--color", "never", "run", "wf.yaml", cwd=tmp_path)
    assert ran.rc == 4
    assert "\x1b" not in ran.stderr and "\r" not in ran.stderr
    assert "bad \\x1b[2Jcleared\\x0d\\x1b[31mred" in ran.stderr
    run_id = cli("--output", "json", "runs", "list", cwd=tmp_path).data["runs"][0]["runId"]
    for view in (["inspect", run_id], ["effects", "list", run_id]):
        plain = cli("--color", "never", *view, cwd=tmp_path)
        assert plain.rc == 0 and "\\x1b[2Jcleared" in plain.stdout
        assert "\x1b" not in plain.stdout and "\r" not in plain.stdout
        coloured = cli("--color", "always", *view, cwd=tmp_path)
        assert "\x1b[31mfailed\x1b[0m" in coloured.stdout  # our own colour still there
        assert "\x1b[2J" not in coloured.stdout and "\\x1b[2Jcleared" in coloured.stdout
    # The JSON keeps the bytes as they were recorded (escaped by JSON itself).
    effects = cli("--output", "json", "effects", "list", run_id, cwd=tmp_path).data["effects"]
    assert "\x1b[2Jcleared\r" in str(effects[0]["error"])
