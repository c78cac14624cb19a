"""What a `compensate` reads of task outputs comes from the source run (spec/dsl.md §4.10).

A compensation runs as a run of its own whose tasks are the inverses alone, so a task output
its `with` reads — directly, through the inverse action's `with` defaults, or through a
variable of the task — is the one the source run recorded. It used to be looked for in the
compensation run, which failed (exit 2, ``reads unknown task``), and a task whose variables
read any task output could not be compensated at all. A read the source run cannot answer
blocks the plan (exit 3) instead of running the inverse with a guess.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Cli

HEAD = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: undo }
spec:
  inputs: { n: 3 }
  policy: { approval: never, writableRoots: [o] }
  actions:
    save: { kind: builtin.write }
    put: { kind: builtin.assign }
    check: { kind: builtin.assert }
    undo: { kind: builtin.write, with: { path: o/x, content: "${{ tasks.p.output.output.v }}" } }
  tasks:
    - { id: p, uses: "action:put", with: { v: one } }
"""

MAKE = (
    '    - { id: a, uses: "action:save", needs: [p], vars: { v: "${{ tasks.p.output.output.v }}" },'
    " with: { path: o/x, content: made }, compensate: INVERSE }\n"
)
FAIL = '    - { id: z, uses: "action:check", needs: [a], with: { that: false } }\n'


def _inverse(content: str) -> str:
    return '{ uses: "action:save", with: { path: o/x, content: "' + content + '" } }'


READS = {
    "a needed task": (_inverse("${{ tasks.p.output.output.v }}"), "one"),
    "its own output": (_inverse("${{ tasks.a.output.status }}"), "changed"),
    "text around an input": (
        _inverse("was ${{ tasks.p.output.output.v }}, n=${{ inputs.n }}"),
        "was one, n=3",
    ),
    "action defaults": ('{ uses: "action:undo" }', "one"),
    "a variable": (_inverse("${{ vars.v }}"), "one"),
}


def _failed_run(cli: Cli, tmp_path: Path, inverse: str) -> str:
    (tmp_path / "wf.yaml").write_text(HEAD + MAKE.replace("INVERSE", inverse) + FAIL)
    assert cli("check", "wf.yaml").rc == 0
    failed = cli("--output", "json", "run", "wf.yaml")
    assert failed.rc == 4, failed.stdout
    assert (tmp_path / "o" / "x").read_text() == "made"
    return str(failed.error["error"]["runId"])


@pytest.mark.parametrize("case", sorted(READS))
def test_a_compensation_reads_task_outputs_from_the_source_run(
    cli: Cli, tmp_path: Path, case: str
) -> None:
    inverse, expected = READS[case]
    run_id = _failed_run(cli, tmp_path, inverse)
    done = cli("--output", "json", "compensate", run_id)
    assert done.rc == 0, done.stderr
    assert (tmp_path / "o" / "x").read_text() == expected


def test_a_read_the_source_cannot_answer_blocks_the_plan(cli: Cli, tmp_path: Path) -> None:
    run_id = _failed_run(cli, tmp_path, _inverse("${{ tasks.p.output.output.gone }}"))
    planned = cli("--output", "json", "compensate", run_id, "--plan")
    assert planned.rc == 3, planned.stderr
    (block,) = planned.data["blocked"]
    assert block["taskId"] == "a" and block["rule"] == "compensation_input_unavailable", block
    assert "tasks.p.output.output.gone" in block["message"], block
    ran = cli("--output", "json", "compensate", run_id)
    assert ran.rc == 3
    assert (tmp_path / "o" / "x").read_text() == "made"
