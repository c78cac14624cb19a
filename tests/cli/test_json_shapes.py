"""JSON shapes scripts read (issue 14 item 7), through the CLI in a fresh directory.

``plan``: tasks keyed by id, ``uses {kind, name}``, ``routeGuards`` on router destinations,
``expansion.parent`` on expanded children — with the plan digest unchanged by the printed
shape. ``inspect``: ``run.workingMemory``, ``budget.usage`` metering every limited dimension
(``artifactBytes`` included, refused over its limit), ``budget.exceeded``. ``compensate``:
``compensatedTasks``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentctl.core.canonical import json_digest
from agentctl.core.compiler import compile_workflow
from agentctl.core.compiler.serialize import task_json
from agentctl.core.dsl import load_workflow
from tests.conftest import EXAMPLES, Cli


def _plan(cli: Cli, name: str) -> Any:
    got = cli("--output", "json", "plan", str(EXAMPLES / name))
    assert got.rc == 0, got.stderr
    return got.data


def test_plan_tasks_are_keyed_with_uses_objects(cli: Cli) -> None:
    e2 = _plan(cli, "e2-agent-router.yaml")
    assert list(e2["tasks"]) == e2["order"]
    uses = {task_id: task["uses"] for task_id, task in e2["tasks"].items()}
    assert uses["scan"] == {"kind": "agent", "name": "scout"}
    assert uses["relay"] == {"kind": "action", "name": "pass"}
    assert uses["pick"] == {"kind": "router", "name": None}
    guards = {t: task.get("routeGuards") for t, task in e2["tasks"].items()}
    select = "${{ tasks.relay.output.output.payload.verdict }}"
    assert guards["publish"] == [
        {"router": "pick", "select": select, "equals": ["go"], "default": False}
    ]
    assert guards["shelve"] == [{"router": "pick", "select": select, "equals": [], "default": True}]
    assert guards["scan"] is None and guards["pick"] is None


def test_plan_names_aggregates_subworkflows_and_children(cli: Cli) -> None:
    e5 = _plan(cli, "e5-subworkflow.yaml")["tasks"]
    assert e5["wrap"]["uses"] == {"kind": "subworkflow_aggregate", "name": "shout@0.1.0"}
    assert e5["wrap--echo"]["expansion"]["parent"] == "wrap"
    e4 = _plan(cli, "e4-loop.yaml")["tasks"]
    assert e4["poll"]["uses"] == {"kind": "loop_aggregate", "name": "step"}
    first = e4["poll--0000-8a729264ad9d"]["expansion"]
    assert first == {"parent": "poll", "kind": "loop", "index": 0}
    e3 = _plan(cli, "e3-fanout.yaml")["tasks"]
    assert e3["build--0000-f4109a71efaf"]["expansion"] == {
        "parent": "build",
        "kind": "matrix",
        "index": 0,
    }
    assert e3["fan"]["uses"]["kind"] == "aggregate" and "expansion" not in e3["fan"]


def test_plan_digest_comes_from_the_compiler_shape(cli: Cli) -> None:
    for name in ("e2-agent-router.yaml", "e3-fanout.yaml", "e5-subworkflow.yaml"):
        printed = _plan(cli, name)
        plan = compile_workflow(load_workflow((EXAMPLES / name).read_text()).document)
        canonical = {
            "name": plan.name,
            "workflowDigest": plan.workflow_digest,
            "order": list(plan.order),
            "maxConcurrency": plan.max_concurrency,
            "tasks": [task_json(task) for task in plan.tasks],
            "requirements": plan.requirements,
        }
        assert printed["planDigest"] == json_digest(canonical) == plan.plan_digest


BUDGETED = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: metered }
spec:
  runtime: { budgets: { maxArtifactBytes: 10, maxToolCalls: 5, maxTasks: 4 } }
  policy: { approval: never, writableRoots: [out] }
  actions: { save: { kind: builtin.write }, note: { kind: builtin.memory.write } }
  tasks:
    - { id: remember, uses: "action:note", with: { key: colour, value: blue } }
    - { id: small, uses: "action:save", with: { path: out/a.txt, content: "12345" } }
    - { id: big, uses: "action:save", needs: [small], with: { path: out/b.txt, content: "123456" } }
"""


def _inspect(cli: Cli, run_id: str) -> Any:
    got = cli("--output", "json", "inspect", run_id, "--db", "db.sqlite")
    assert got.rc == 0, got.stderr
    return got.data


def test_inspect_meters_artifact_bytes_and_working_memory(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(BUDGETED, encoding="utf-8")
    first = cli("--output", "json", "run", "wf.yaml", "--db", "db.sqlite")
    assert first.rc == 4  # `big` would store 11 artifact bytes in all: the run fails
    run_id = first.error["error"]["runId"]
    data = _inspect(cli, run_id)
    assert data["run"]["workingMemory"] == {"colour": "blue"}
    budget = data["budget"]
    assert budget["usage"]["artifactBytes"] == 5 and budget["usage"]["toolCalls"] == 0
    assert budget["usage"]["tasks"] == 3
    assert budget["exceeded"] == {"dimension": "artifactBytes", "limit": 10, "attempted": 11}
    states = {t["taskId"]: t["state"] for t in data["tasks"]}
    assert states == {"remember": "succeeded", "small": "succeeded", "big": "failed"}
    assert (tmp_path / "out" / "b.txt").read_text() == "123456"  # the write itself happened
    assert [a["taskId"] for a in data["artifacts"]] == ["small"]


COMPENSATED = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: undo }
spec:
  policy: { approval: never, writableRoots: [out] }
  actions: { save: { kind: builtin.write }, check: { kind: builtin.assert } }
  tasks:
    - { id: make, uses: "action:save", with: { path: out/r.txt, content: made },
        compensate: { uses: "action:save", with: { path: out/r.txt, content: undone } } }
    - { id: keep, uses: "action:save", with: { path: out/k.txt, content: kept } }
    - { id: verify, uses: "action:check", needs: [make, keep], with: { that: false, message: boom } }
"""


def test_compensate_lists_compensated_tasks(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(COMPENSATED, encoding="utf-8")
    failed = cli("--output", "json", "run", "wf.yaml", "--db", "db.sqlite")
    assert failed.rc == 4
    run_id = failed.error["error"]["runId"]
    done = cli("--output", "json", "compensate", run_id, "--db", "db.sqlite")
    assert done.rc == 0, done.stderr
    assert done.data["compensatedTasks"] == ["make"]
    assert (tmp_path / "out" / "r.txt").read_text() == "undone"
