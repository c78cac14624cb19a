"""A FIFO in the workspace neither hangs a run nor turns into an uncertain effect.

Reads take regular files only (spec/dsl.md §3 builtin.read: UTF-8 text ≤ 1 MiB); a write
first looks at the target's current content (unchanged content ⇒ no effect). Opening a FIFO
for reading blocks until a writer appears, so both refuse it without waiting for one: the
task fails definitively (exit 4) at once, and the FIFO is left as it was.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

WORKFLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: fifo }
spec:
  policy: { approval: never, writableRoots: [out] }
  actions: { act: { kind: %s } }
  tasks: [ { id: t, uses: "action:act", timeoutSeconds: 30, with: %s } ]
"""

CASES = {
    "read": ("builtin.read", "{ path: out/pipe }"),
    "write": ("builtin.write", "{ path: out/pipe, content: hello }"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_fifo_is_refused_at_once(case: str, cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "out").mkdir()
    os.mkfifo(tmp_path / "out" / "pipe")
    wf = write_workflow(WORKFLOW % CASES[case])
    db = str(tmp_path / "state" / "r.db")
    started = time.monotonic()
    done = cli("--output", "json", "run", str(wf), "--db", db, timeout=60)
    assert time.monotonic() - started < 20, "the run waited on the FIFO"
    assert done.rc == 4, done.stderr
    assert "not a regular file" in done.error["error"]["message"]
    assert "Traceback" not in done.stderr
    assert stat.S_ISFIFO(os.lstat(tmp_path / "out" / "pipe").st_mode)
    shown = cli("--output", "json", "inspect", done.error["error"]["runId"], "--db", db)
    assert shown.data["run"]["state"] == "failed"
    assert [e["status"] for e in shown.data["effects"]] in ([], ["failed"])


SECRET_WORKFLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: fifo-secret }
spec:
  policy: { approval: never, processAllowlist: [true], secretFileRoots: [secrets] }
  actions:
    use: { kind: builtin.shell.exec, command: /bin/true, env: { T: { file: secrets/pipe } } }
  tasks: [ { id: use, uses: "action:use" } ]
"""


def test_a_fifo_as_a_file_secret_fails_closed_at_once(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "secrets").mkdir()
    os.mkfifo(tmp_path / "secrets" / "pipe")
    wf = write_workflow(SECRET_WORKFLOW)
    started = time.monotonic()
    done = cli("--output", "json", "run", str(wf), "--db", str(tmp_path / "r.db"), timeout=60)
    assert time.monotonic() - started < 20, "the run waited on the FIFO"
    assert done.rc == 4, done.stderr
    message = done.error["error"]["message"]
    assert "secret file secrets/pipe is not a regular file" in message
