"""``varorigins``: each task's variable origins agree with the plan's merged ``vars``.

The origins come from the same layers and fold as the values (``variables.task_origins``),
so for every compiled task — plain, matrix child, sub-workflow task — they name exactly the
plan's variables, and the report holds no value.
"""

from __future__ import annotations

import json
from typing import Any

from agentctl.core.compiler import CapturedVars, compile_workflow
from agentctl.core.compiler.variables import LAYERS, VarLayer
from agentctl.core.compiler.varorigins import ENGINE, explain_variables
from agentctl.core.dsl import load_workflow
from agentctl.core.plan import Plan

VALUE = "v-never-shown-5521"

DOC = f"""\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{ name: origins }}
spec:
  varsFiles: [w.yaml]
  vars: {{ a: "{VALUE}" }}
  actions: {{ put: {{ kind: builtin.assign }} }}
  subworkflows:
    inner: {{ version: 0.1.0, inputs: {{ word: hey }},
      outputs: {{ o: "${{{{ tasks.echo.output.output }}}}" }},
      tasks: [ {{ id: echo, uses: "action:put", vars: {{ b: "{VALUE}" }},
                 with: {{ w: "${{{{ vars.b }}}}" }} }} ] }}
  tasks:
    - {{ id: one, uses: "action:put", varsFiles: [t.yaml], vars: {{ c: 1 }},
         with: {{ x: "${{{{ vars.a }}}}" }} }}
    - {{ id: grid, uses: "action:put", matrix: {{ axes: {{ n: [1, 2] }} }},
         with: {{ x: "${{{{ vars.matrix.n }}}}" }} }}
    - {{ id: call, uses: "workflow:inner", with: {{ word: hi }} }}
"""


def _compiled() -> tuple[dict[str, Any], CapturedVars, Plan]:
    document = load_workflow(DOC.encode(), file="wf.yaml").document
    files: dict[str, Any] = {"w.yaml": {"a": 0, "w": VALUE}, "t.yaml": {"a": 2, "t": VALUE}}
    layers = [
        VarLayer("cliVarsFiles", "over.yaml", {"c": VALUE, "f": 1}),
        VarLayer("cliVars", "--var", {"f": VALUE}),
    ]
    captured = CapturedVars.from_cli_layers(files, layers, {})
    return document, captured, compile_workflow(document, variables=captured)


def test_origins_name_exactly_the_plans_variables() -> None:
    document, captured, plan = _compiled()
    assert captured.cli == {"c": VALUE, "f": VALUE}
    report = explain_variables(document, plan, captured)
    planned = {task.id: set(task.vars) for task in plan.tasks}
    assert {t.task_id: set(t.variables) for t in report.tasks} == planned
    by_id = {t.task_id: t.variables for t in report.tasks}
    one = {name: (o.layer, o.source) for name, o in by_id["one"].items()}
    assert one == {
        "a": ("taskVarsFiles", "t.yaml"),
        "t": ("taskVarsFiles", "t.yaml"),
        "w": ("workflowVarsFiles", "w.yaml"),
        "c": ("cliVarsFiles", "over.yaml"),
        "f": ("cliVars", "--var"),
    }
    [echo] = [t for t in by_id if t.endswith("--echo")]
    assert by_id[echo]["b"].source == "spec.subworkflows.inner.tasks.0.vars"
    grid = [v for t, v in by_id.items() if t.startswith("grid--")]
    assert len(grid) == 2 and all(v["matrix"].layer == "engineBinding" for v in grid)
    named = {o.layer for t in report.tasks for o in t.variables.values()}
    named |= {layer.layer for layer in report.layers}
    assert named <= {*LAYERS, ENGINE}
    assert VALUE not in json.dumps(report.to_json())
