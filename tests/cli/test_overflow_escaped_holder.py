"""An output overflow stays a definitive failure when an escaped grandchild holds the pipe.

spec/cli.md §10: overflow ⇒ SIGKILL the process group, kill and wait the child, *stop the
readers* ⇒ failed effect. A background process that left the group (``setsid``) survives the
group kill and keeps the stdout pipe open; the readers must not wait for its EOF, which would
let the run reach its timeout and leave the effect uncertain instead.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

from tests.conftest import Cli

HOLDER = """\
import os, sys, time
os.setsid()
with open(sys.argv[1], "w") as f:
    f.write(str(os.getpid()))
time.sleep(120)
"""

WORKFLOW = f"""\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {{ name: escaped }}
spec:
  policy: {{ approval: never, processAllowlist: [sh] }}
  actions:
    p:
      kind: builtin.shell.exec
      command: /bin/sh
      args: [-c, '{sys.executable} holder.py holder.pid &
        while [ ! -s holder.pid ]; do sleep 0.05; done; head -c 5000 /dev/zero']
      stdoutLimitBytes: 100
      timeoutSeconds: 60
  tasks: [ {{ id: p, uses: "action:p" }} ]
"""


def _kill_holder(pid_file: Path) -> None:
    for _ in range(200):  # written before the overflow
        if pid_file.exists() and pid_file.read_text(encoding="utf-8"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text(encoding="utf-8")), signal.SIGKILL)
            return
        time.sleep(0.05)


def test_an_overflow_is_a_failed_effect_though_an_escaped_process_holds_stdout(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "holder.py").write_text(HOLDER, encoding="utf-8")
    (tmp_path / "wf.yaml").write_text(WORKFLOW, encoding="utf-8")
    try:
        done = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    finally:
        _kill_holder(tmp_path / "holder.pid")
    assert done.rc == 4, (done.stdout, done.stderr)
    message = done.error["error"]["message"]
    assert message == "run failed: p: process killed: stdout exceeded its limit of 100 bytes"
    effects = cli(
        "--output", "json", "effects", "list", done.error["error"]["runId"], "--db", "r.db"
    )
    assert [e["status"] for e in effects.data["effects"]] == ["failed"]
