"""The spec's §10 examples (spec/dsl.md) compiled through the real loader, plus every
failing variant that is a compile-time error."""

from __future__ import annotations

from typing import Any

import pytest

from agentctl.core.compiler import check_result_json, compile_workflow, plan_to_json
from agentctl.core.dsl import load_workflow
from agentctl.core.plan import Plan
from agentctl.errors import ValidationError

HEADER = "apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\n"

E1 = """\
metadata: { name: e1 }
spec:
  inputs: { count: 3, meta: { ok: true } }
  actions: { put: { kind: builtin.assign }, check: { kind: builtin.assert } }
  outputs: { total: "${{ tasks.stash.output.output.n }}" }
  tasks:
    - { id: stash, uses: "action:put", with: { n: "${{ inputs.count }}", label: "n=${{ inputs.count }}", meta: "${{ inputs.meta }}" } }
    - { id: gate, uses: "action:check", needs: [stash], with: { that: "${{ tasks.stash.output.output.meta.ok == true }}", message: bad } }
"""

E2 = """\
metadata: { name: e2 }
spec:
  policy: { approval: never, toolsAllow: [peek] }
  providers: { sim: { kind: fake } }
  tools:
    peek: { kind: builtin.workspace.read, description: read, capability: filesystem.read, risk: low,
      effectClass: observe, idempotency: idempotent, retrySafe: true, timeoutSeconds: 5, outputSchema: { type: object },
      inputSchema: { type: object, properties: { path: { type: string } }, required: [path], additionalProperties: false } }
  agents:
    scout: { provider: sim, model: m, instructions: Gather., tools: [peek], maxTurns: 2, maxToolCalls: 1,
      structuredOutput: { type: object, properties: { verdict: { type: string } }, required: [verdict] },
      providerOptions: { toolInput: { path: notes.txt }, finalText: '{"verdict":"go"}' } }
  actions: { pass: { kind: builtin.assign } }
  tasks:
    - { id: scan, uses: "agent:scout", with: { prompt: inspect } }
    - { id: relay, uses: "action:pass", needs: [scan], with: { from: scout, to: editor, payload: "${{ tasks.scan.output }}" },
        outputSchema: { type: object, required: [output] } }
    - { id: pick, uses: router, needs: [relay], route: { select: "${{ tasks.relay.output.output.payload.verdict }}",
        cases: [ { equals: go, tasks: [publish] } ], default: [shelve] } }
    - { id: publish, uses: "action:pass", needs: [pick] }
    - { id: shelve, uses: "action:pass", needs: [pick] }
"""

E3 = """\
metadata: { name: e3 }
spec:
  runtime: { maxConcurrency: 3 }
  policy: { approval: never }
  actions: { remember: { kind: builtin.memory.write }, put: { kind: builtin.assign } }
  tasks:
    - { id: left, uses: "action:remember", with: { key: left, value: L } }
    - { id: right, uses: "action:remember", with: { key: right, value: R } }
    - { id: fan, uses: "action:put", foreach: { items: [dev, prod], as: env, maxItems: 2 }, with: { env: "${{ vars.env }}", i: "${{ vars.foreachIndex }}" } }
    - { id: build, uses: "action:put", matrix: { axes: { os: [linux, mac], arch: [amd64, arm64] }, maxItems: 4 },
        with: { os: "${{ vars.matrix.os }}", arch: "${{ vars.matrix.arch }}" } }
    - { id: report, uses: "action:put", needs: [left, right, fan, build], with: { seen: "${{ memory.left }}", fan: "${{ tasks.fan.output.items }}" } }
"""

E4 = """\
metadata: { name: e4 }
spec:
  actions: { step: { kind: builtin.assign } }
  outputs: { runs: "${{ tasks.poll.output.iterations }}" }
  tasks:
    - { id: poll, uses: "action:step", loop: { maxIterations: 4, while: "${{ vars.loopIndex < 3 }}", initial: { n: 0 } },
        with: { i: "${{ vars.loopIndex }}", prev: "${{ vars.loopPrevious }}" } }
"""

E5 = """\
metadata: { name: e5 }
spec:
  actions: { put: { kind: builtin.assign } }
  subworkflows:
    shout: { version: 0.1.0, inputs: { word: hey },
      inputSchema: { type: object, properties: { word: { type: string } }, required: [word] },
      outputSchema: { type: object, properties: { loud: { type: string } }, required: [loud] },
      outputs: { loud: "${{ tasks.echo.output.output.w }}" },
      tasks: [ { id: echo, uses: "action:put", with: { w: "${{ inputs.word }}" } } ] }
  outputs: { loud: "${{ tasks.wrap.output.loud }}" }
  tasks: [ { id: wrap, uses: "workflow:shout", with: { word: hi } } ]
"""

E6 = """\
metadata: { name: e6 }
spec:
  policy: { writableRoots: [out] }
  actions: { save: { kind: builtin.write } }
  tasks: [ { id: save, uses: "action:save", with: { path: out/a.txt, content: hello } } ]
"""

E7 = """\
metadata: { name: e7 }
spec:
  policy: { approval: never, writableRoots: [out] }
  actions: { save: { kind: builtin.write }, check: { kind: builtin.assert } }
  tasks:
    - { id: make, uses: "action:save", with: { path: out/r.txt, content: made },
        compensate: { uses: "action:save", with: { path: out/r.txt, content: undone }, retry: { maxAttempts: 2 } } }
    - { id: verify, uses: "action:check", needs: [make], with: { that: false, message: boom } }
"""

E8 = """\
metadata: { name: e8 }
spec:
  runtime: { budgets: { maxProviderRequests: 2, maxTasks: 2 } }
  providers: { sim: { kind: fake } }
  agents: { w: { provider: sim, model: m, instructions: echo, maxTurns: 1, providerOptions: { failFirst: 1 } } }
  tasks:
    - { id: first, uses: "agent:w", with: { prompt: one }, retry: { maxAttempts: 2 } }
    - { id: second, uses: "agent:w", needs: [first], with: { prompt: two } }
"""

E9 = """\
metadata: { name: e9 }
spec:
  policy: { approval: never, processAllowlist: [echo] }
  actions: { hello: { kind: builtin.shell.exec, command: /bin/echo, args: [hi], timeoutSeconds: 5, stdoutLimitBytes: 1024 } }
  tasks: [ { id: run, uses: "action:hello" } ]
"""


def _compile(body: str, *edits: tuple[str, str]) -> Plan:
    for old, new in edits:
        assert old in body, old
        body = body.replace(old, new)
    loaded = load_workflow(HEADER + body, "wf.yaml")
    return compile_workflow(loaded.document, file="wf.yaml", locate=loaded.locate)


def _codes(body: str, *edits: tuple[str, str]) -> list[tuple[str, Any]]:
    with pytest.raises(ValidationError) as info:
        _compile(body, *edits)
    return [(d.code, d.line) for d in info.value.diagnostics]


def test_e1_dataflow() -> None:
    plan = _compile(E1)
    assert plan.order == ("stash", "gate")
    assert check_result_json(plan) == {
        "valid": True,
        "workflow": "e1",
        "workflowDigest": plan.workflow_digest,
        "planDigest": plan.plan_digest,
        "tasks": 2,
    }
    found = _codes(E1, ("needs: [stash], ", ""))
    assert [code for code, _ in found] == ["invalid_template"]
    assert found[0][1] is not None  # located in the YAML


def test_e2_agent_router() -> None:
    plan = _compile(E2)
    assert plan.order == ("scan", "relay", "pick", "publish", "shelve")
    route = plan.task("pick").route
    assert route is not None and route.default == ("shelve",)
    assert plan.task("relay").output_schema == {"type": "object", "required": ["output"]}
    data = plan_to_json(plan)
    assert data["requirements"]["providers"][0]["name"] == "sim"
    assert [t["name"] for t in data["requirements"]["tools"]] == ["peek"]
    reasoning = ("maxTurns: 2,", "maxTurns: 2, reasoning: { effort: low },")
    assert [code for code, _ in _codes(E2, reasoning)] == ["unsupported_capability"]


def test_e3_fanout_and_memory() -> None:
    plan = _compile(E3)
    matrices = [plan.task(c).bindings["matrix"] for c in plan.task("build").children]
    combos = [(m["arch"], m["os"]) for m in matrices]
    assert combos == [("amd64", "linux"), ("amd64", "mac"), ("arm64", "linux"), ("arm64", "mac")]
    assert plan.order[-1] == "report" and plan.max_concurrency == 3
    over = ("maxItems: 4", "maxItems: 3")
    assert [code for code, _ in _codes(E3, over)] == ["schema_violation"]
    overlap = ("key: right", "key: left")
    assert [code for code, _ in _codes(E3, overlap)] == ["schema_violation"]


def test_e3_foreach_templated_key_quirk() -> None:
    templated = (
        '- { id: fan, uses: "action:put",',
        '- { id: fan, uses: "action:remember", memoryWrites: [k_dev, k_prod],',
    )
    # `i` is renamed `value`: builtin.memory.write reads only `key` and `value`.
    key = (
        'with: { env: "${{ vars.env }}", i:',
        'with: { key: "k_${{ vars.env }}", value:',
    )
    assert [code for code, _ in _codes(E3, templated, key)] == ["schema_violation"]
    serial = ("maxConcurrency: 3", "maxConcurrency: 1")
    _compile(E3, templated, key, serial)


def test_e4_loop() -> None:
    plan = _compile(E4)
    assert len(plan.task("poll").children) == 4 and plan.task("poll").max_iterations == 4
    assert plan.order[-1] == "poll"
    with_when = ("loop: {", 'when: "${{ inputs.x }}", loop: {')
    assert "schema_violation" in [code for code, _ in _codes(E4, with_when)]


def test_e5_subworkflow() -> None:
    plan = _compile(E5)
    assert plan.order == ("wrap--inputs-a160ebeb", "wrap--echo", "wrap")
    assert plan.task("wrap--inputs-a160ebeb").with_ == {"word": "hi"}
    for edit in [
        ("with: { word: hi }", "with: { word: hi }, retry: { maxAttempts: 2 }"),
        ("with: { word: hi }", 'with: { word: hi }, when: "${{ inputs.x }}"'),
        ("version: 0.1.0", "version: v1"),
    ]:
        assert _codes(E5, edit), edit


def test_e6_to_e9_compile() -> None:
    assert _compile(E6).order == ("save",)
    assert _compile(E7).order == ("make", "verify")
    assert _compile(E8).order == ("first", "second")
    plan = _compile(E9)
    assert plan_to_json(plan)["requirements"]["processes"][0]["command"] == "/bin/echo"


def test_e7_compensate_on_assign() -> None:
    edit = ("actions: { save:", "actions: { put: { kind: builtin.assign }, save:")
    make_assign = ('{ id: make, uses: "action:save"', '{ id: make, uses: "action:put"')
    assert [code for code, _ in _codes(E7, edit, make_assign)] == ["unsupported_capability"]


def test_e8_max_tasks() -> None:
    assert [code for code, _ in _codes(E8, ("maxTasks: 2", "maxTasks: 1"))] == ["schema_violation"]
