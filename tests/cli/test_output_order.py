"""A run's output has one member order wherever it is shown: the run's own outcome, inspect,
replay and fork give the same text, in canonical (sorted-key) order — the order the stored
output comes back in, whether the plan was compiled fresh or read back from the ledger."""

from __future__ import annotations

import json
from pathlib import Path

HEAD = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: order }
spec:
  actions: { put: { kind: builtin.assign } }
"""
OUTPUTS = """\
  outputs:
    zz: "${{ tasks.zeta.output.output.v }}"
    mid: { y: 1, b: "${{ tasks.alpha.output.output.v }}" }
    aa: "${{ tasks.alpha.output.output.v }}"
"""
TASKS = """\
  tasks:
    - { id: zeta, uses: "action:put", with: { v: 1 } }
    - { id: alpha, uses: "action:put", with: { v: 2 } }
"""


def _output_text(got) -> str:  # type: ignore[no-untyped-def]
    assert got.rc == 0, got.stderr
    return json.dumps(got.data["output"])


def _shown_everywhere(cli, wf: Path, db: Path) -> list[str]:  # type: ignore[no-untyped-def]
    ran = cli("--output", "json", "run", str(wf), "--db", str(db))
    run_id = ran.data["runId"]
    inspected = cli("--output", "json", "inspect", run_id, "--db", str(db))
    assert inspected.rc == 0, inspected.stderr
    return [
        _output_text(ran),
        json.dumps(inspected.data["run"]["output"]),
        _output_text(cli("--output", "json", "replay", run_id, "--db", str(db))),
        _output_text(cli("--output", "json", "fork", run_id, "--db", str(db))),
    ]


def test_declared_outputs_show_in_one_order(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    texts = _shown_everywhere(cli, write_workflow(HEAD + OUTPUTS + TASKS), tmp_path / "r.db")
    assert texts[0] == json.dumps({"aa": 2, "mid": {"b": 2, "y": 1}, "zz": 1})
    assert texts == [texts[0]] * 4


def test_the_default_output_shows_in_one_order(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    texts = _shown_everywhere(cli, write_workflow(HEAD + TASKS), tmp_path / "r.db")
    assert list(json.loads(texts[0])) == ["alpha", "zeta"]
    assert texts == [texts[0]] * 4
