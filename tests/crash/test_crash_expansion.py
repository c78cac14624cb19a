"""A coordinator killed in the middle of an expansion resumes without repeating an effect.

Every child of each static graph feature appends one line to a marker file from a real
subprocess; the coordinator SIGKILLs itself once the third effect's ``started`` is durable —
in a chain that is the pipelined commit which also made the second effect's outcome durable.
``resume`` reports the third effect uncertain (it never ran; the operator says so), and after
the second ``resume`` every line appears exactly once and the aggregate records every child.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

HEAD = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: expand }
spec:
  policy: { approval: never, processAllowlist: [sh] }
  actions:
    mark: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo $0 >> marker.txt", "${TAG}"] }
    put: { kind: builtin.assign }
"""

FEATURES = {
    "foreach": """\
  tasks:
    - { id: fan, uses: "action:put", foreach: { items: [a, b, c, d], maxItems: 4 }, with: { v: "${{ vars.item }}" } }
    - { id: m1, uses: "action:mark1", needs: [fan] }
    - { id: m2, uses: "action:mark2", needs: [fan] }
    - { id: m3, uses: "action:mark3", needs: [m1, m2] }
""",
    "matrix": """\
  tasks:
    - { id: grid, uses: "action:mark1", matrix: { axes: { os: [linux, mac], arch: [x86] }, maxItems: 2 } }
    - { id: m2, uses: "action:mark2", needs: [grid] }
    - { id: m3, uses: "action:mark3", needs: [m2] }
""",
    "loop": """\
  tasks:
    - { id: poll, uses: "action:mark1", loop: { maxIterations: 3, while: "${{ vars.loopIndex < 2 }}" } }
    - { id: m2, uses: "action:mark2", needs: [poll] }
    - { id: m3, uses: "action:mark3", needs: [m2] }
""",
    "subworkflow": """\
  subworkflows:
    twice:
      version: 1.0.0
      tasks:
        - { id: one, uses: "action:mark1" }
        - { id: two, uses: "action:mark2", needs: [one] }
  tasks:
    - { id: call, uses: "workflow:twice" }
    - { id: m3, uses: "action:mark3", needs: [call] }
""",
    "router": """\
  tasks:
    - { id: first, uses: "action:mark1" }
    - id: pick
      uses: router
      needs: [first]
      route: { select: "${{ tasks.first.output.exitCode }}", cases: [ { equals: 0, tasks: [yes] } ], default: [no] }
    - { id: "yes", uses: "action:mark2", needs: [pick] }
    - { id: "no", uses: "action:put", needs: [pick] }
    - { id: m3, uses: "action:mark3", needs: ["yes"] }
""",
}


def _workflow(feature: str) -> str:
    marks = "".join(
        f'    mark{i}: {{ kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo m{i}-$$ >> marker.txt; echo m{i} >> once.txt"] }}\n'
        for i in (1, 2, 3)
    )
    head = HEAD.replace(
        '    mark: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo $0 >> marker.txt", "${TAG}"] }\n',
        marks,
    )
    return head + FEATURES[feature]


@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_kill_mid_expansion_then_resume(feature: str, cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    wf = write_workflow(_workflow(feature))
    db = tmp_path / "r.db"
    kill = {"AGENTCTL_CRASH_AT": "coordinator.after_started", "AGENTCTL_CRASH_HIT": "3"}
    first = cli("--output", "json", "run", str(wf), "--db", str(db), env=kill)
    assert first.rc == -9, first.stderr
    ran = (tmp_path / "once.txt").read_text().split()
    assert len(ran) == 2, ran  # killed before the third effect was dispatched
    run_id = cli("--output", "json", "runs", "list", "--db", str(db)).data["runs"][0]["runId"]
    blocked = cli("--output", "json", "resume", run_id, "--db", str(db))
    assert blocked.rc == 3, blocked.stderr
    listed = cli("--output", "json", "effects", "list", run_id, "--db", str(db)).data["effects"]
    uncertain = [e["effectId"] for e in listed if e["status"] == "uncertain"]
    confirmed = [e for e in listed if e["status"] == "succeeded"]
    assert len(uncertain) == 1 and len(confirmed) == 2, listed
    reason = ["--status", "not-applied", "--reason", "its marker line is missing"]
    rec = cli("effects", "reconcile", uncertain[0], *reason, "--db", str(db))
    assert rec.rc == 0, rec.stderr
    resumed = cli("--output", "json", "resume", run_id, "--db", str(db))
    assert resumed.rc == 0, resumed.stderr
    lines = (tmp_path / "once.txt").read_text().split()
    data = cli("--output", "json", "inspect", run_id, "--db", str(db)).data
    shell = [e for e in data["effects"] if e["operation"] == "builtin.shell.exec"]
    # The uncertain effect stays as it was recorded (reconciliation appends, never rewrites).
    assert [e["effectId"] for e in shell if e["status"] != "succeeded"] == uncertain
    effects = [e for e in shell if e["status"] == "succeeded"]
    # Every confirmed effect ran exactly once: one marker line per effect, one effect per task.
    assert len(lines) == len(effects), (lines, [e["taskId"] for e in effects])
    per_task = Counter(e["taskId"] for e in effects)
    assert all(n == 1 for n in per_task.values()), per_task
    assert data["run"]["state"] == "succeeded"
