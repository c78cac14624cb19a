"""An agent task's own ``timeoutSeconds`` cuts a call that would outlast it (CLI, tmp dir).

The fake provider answers after ``delayMs``; the agent allows each model call 60 s, the task
1 s in all: the call is cut at the task's deadline, and ends as any timed-out model call does
(``uncertain``, never resent; the run stops with exit 4 until it is reconciled).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import Cli

WORKFLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: cut }
spec:
  policy: { approval: never }
  providers: { sim: { kind: fake } }
  agents:
    slow:
      provider: sim
      model: m
      instructions: Answer.
      timeoutSeconds: 60
      providerOptions: { delayMs: 20000, finalText: late }
  tasks:
    - { id: a, uses: "agent:slow", with: { prompt: go }, timeoutSeconds: 1 }
"""


def test_a_model_call_is_cut_at_the_tasks_deadline_and_left_uncertain(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "wf.yaml").write_text(WORKFLOW, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 4, (done.stdout, done.stderr)
    run_id = done.error["error"]["runId"]
    seen = cli("--output", "json", "inspect", run_id)
    assert seen.rc == 0, seen.stderr
    [effect] = seen.data["effects"]
    assert (effect["operation"], effect["status"]) == ("fake", "uncertain")
    timed_out = re.fullmatch(r"effect timed out after (\d+(?:\.\d+)?) s", effect["error"])
    assert timed_out is not None, effect["error"]
    assert float(timed_out.group(1)) <= 1.0  # what was left of the task's 1 s, not the 60 s
    [task] = seen.data["tasks"]
    assert task["state"] == "waiting_for_effect"
    assert "the task's timeoutSeconds left the call" in str(task["error"])
