"""A ``{process}`` secret helper stays inside its limits (spec/cli.md §12, spec/dsl.md §2).

``outputLimitBytes`` bounds what is read, not what is kept: a helper that floods its stdout is
stopped at the limit, not buffered until its timeout. A helper that outlives its
``timeoutSeconds`` is killed with every process it started, like an action's process group
(§10). Either way the task fails closed (exit 4) and no helper process is left behind.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

HEAD = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: helper }
spec:
  policy: { approval: never, processAllowlist: [true], secretProcessAllowlist: [sh] }
  actions:
    use: { kind: builtin.shell.exec, command: /bin/true, env: { T: { process: %s } } }
  tasks: [ { id: use, uses: "action:use" } ]
"""


def _helpers_of(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if marker in " ".join(proc.info["cmdline"] or []):
            found.append(proc)
    return found


def test_a_flooding_helper_is_stopped_at_its_output_limit(  # type: ignore[no-untyped-def]
    cli, write_workflow, tmp_path: Path
) -> None:
    flood = '{ command: /bin/sh, args: [-c, "while :; do echo xxxxxxxxxxxxxxxx; done"], timeoutSeconds: 30, outputLimitBytes: 64 }'
    wf = write_workflow(HEAD % flood)
    started = time.monotonic()
    done = cli("--output", "json", "run", str(wf), "--db", str(tmp_path / "r.db"))
    assert done.rc == 4, done.stderr
    assert time.monotonic() - started < 20, "the helper ran until its timeout"
    assert "more than 64 bytes" in done.error["error"]["message"]
    assert "Traceback" not in done.stderr


@pytest.mark.sqlite_only(reason="the helper's processes, not the ledger, are what is checked")
def test_a_helper_past_its_timeout_is_killed_with_its_children(  # type: ignore[no-untyped-def]
    cli, write_workflow, tmp_path: Path
) -> None:
    marker = f"sleep 60.{os.getpid()}{time.monotonic_ns() % 10_000}"
    slow = f'{{ command: /bin/sh, args: [-c, "{marker} & {marker}"], timeoutSeconds: 1 }}'
    wf = write_workflow(HEAD % slow)
    done = cli("--output", "json", "run", str(wf), "--db", str(tmp_path / "r.db"))
    left = _helpers_of(marker)
    for proc in left:
        proc.kill()
    assert left == [], "helper processes outlived the run"
    assert done.rc == 4, done.stderr
    assert "timed out after 1 s" in done.error["error"]["message"]


AGENT = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: helper }
spec:
  policy: { approval: never, secretProcessAllowlist: [sh], networkAllowlist: [127.0.0.1],
    network: { allowPrivate: true, allowedPorts: [9] } }
  providers:
    p: { kind: openai, endpoint: "http://127.0.0.1:9/v1/responses",
      credential: { process: { command: /bin/sh, args: [-c, "exit 3"] } } }
  agents: { a: { provider: p, model: m, instructions: hi } }
  tasks: [ { id: ask, uses: "agent:a", with: { prompt: p } } ]
"""


def test_a_failing_credential_helper_names_its_task_once(  # type: ignore[no-untyped-def]
    cli, write_workflow, tmp_path: Path
) -> None:
    # The helper runs when the call is dispatched (the pre-flight does not run helpers): the
    # task fails closed before anything is sent, and its error says which task once.
    done = cli(
        "--output", "json", "run", str(write_workflow(AGENT)), "--db", str(tmp_path / "r.db")
    )
    assert done.rc == 4, done.stderr
    message = done.error["error"]["message"]
    assert message.endswith("ask: task ask: p: credential: secret helper /bin/sh exited 3")
    assert message.count("task ask:") == 1


@pytest.mark.sqlite_only(reason="the helper's start, not the ledger, is what is checked")
def test_a_helper_that_cannot_start_says_why_as_the_os_does(  # type: ignore[no-untyped-def]
    cli, write_workflow, tmp_path: Path
) -> None:
    (tmp_path / "sh").write_text("#!/bin/sh\necho x\n")  # allowlisted name, not executable
    wf = write_workflow(HEAD % "{ command: ./sh }")
    done = cli("--output", "json", "run", str(wf), "--db", str(tmp_path / "r.db"))
    assert done.rc == 4, done.stderr
    message = done.error["error"]["message"]
    assert "cannot start secret helper './sh': Permission denied" in message
    assert "PermissionError" not in message
