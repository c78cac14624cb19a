"""Drives one run through ``api.start_run`` in a fresh interpreter, for test_worker_fork.py.

``python fork_driver.py WORKDIR MODE``: MODE ``plain`` (nothing else runs in this process),
``thread`` (a thread of ours is alive, so the worker must be exec'd), ``twice`` (a second run
in the same process, after the first left trio's idle worker threads), ``hang`` (the run
sleeps; the test kills this process) or ``logging`` (this process logs to a file, and the
one task is ``fork_probe_ext``'s, which reports the worker's logging handlers). Before the run it opens a file it keeps open and
installs a SIGTERM handler, as an application embedding agentctl might. The workflow's one
task reports, from the worker it ran in (its parent process), the worker's command line,
session, open descriptors and caught signals; the script prints the run's output as JSON.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from agentctl.coordinator import api
from agentctl.core.compiler import compile_workflow
from agentctl.core.dsl import load_workflow

PROBE = (
    'tr "\\0" " " < /proc/$PPID/cmdline; echo; cut -d" " -f6 /proc/$PPID/stat;'
    " for f in /proc/$PPID/fd/*; do readlink $f; done | sort | tr '\\n' ' '; echo;"
    " grep SigCgt /proc/$PPID/status; echo $PPID"
)

FLOW = """
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: forked}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    probe: {kind: builtin.shell.exec, command: /bin/sh, args: ["-c", %s], timeoutSeconds: 60}
  outputs:
    probe: "${{ tasks.probe.output.stdout }}"
  tasks:
    - {id: probe, uses: action:probe}
"""


STATE_FLOW = """
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: forked-state}
spec:
  policy: {approval: never}
  actions:
    state: {kind: test.worker_state}
  outputs:
    state: "${{ tasks.state.output }}"
  tasks:
    - {id: state, uses: action:state}
"""


def _flow(workdir: Path, mode: str) -> str:
    if mode == "logging":
        from agentctl.core import registry
        from tests.coordinator.fork_probe_ext import STATE

        registry.register(STATE)
        logging.basicConfig(filename=workdir / "app.log", level=logging.INFO)
        return STATE_FLOW
    return FLOW % json.dumps("exec sleep 60" if mode == "hang" else PROBE)


def main(workdir: Path, mode: str) -> None:
    loaded = load_workflow(_flow(workdir, mode).encode(), file="wf.yaml")
    plan = compile_workflow(loaded.document, file="wf.yaml")
    kept = open(workdir / "kept-open.txt", "w")  # noqa: SIM115 — must stay open during the run
    signal.signal(signal.SIGTERM, lambda *_: None)
    if mode == "thread":
        threading.Thread(target=threading.Event().wait, daemon=True).start()
    print(json.dumps({"driver": os.getpid()}), flush=True)
    for n in range(2 if mode == "twice" else 1):
        out = api.start_run(
            document=loaded.document,
            plan=plan,
            inputs={},
            db=str(workdir / f"runtime{n}.db"),
            workspace=str(workdir),
            timeout_s=120,
        )
        print(json.dumps({"state": out.state, "output": out.output}), flush=True)
    kept.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
