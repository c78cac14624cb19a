"""The example workflows E1-E9 of spec/dsl.md §10 load, and their normalized documents carry the
spec defaults the compiler relies on; also ``locate`` and the legacy ``playbook:`` translation.

``EXAMPLES`` is imported by the other ``test_dsl_*`` modules.
"""

from __future__ import annotations

import json

import pytest

from agentctl.core.dsl import LoadedWorkflow, load_workflow
from agentctl.errors import ValidationError

HEAD = "apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\n"
EXAMPLES = {
    "e1": HEAD
    + """metadata: { name: e1 }
spec:
  inputs: { count: 3, meta: { ok: true } }
  actions: { put: { kind: builtin.assign }, check: { kind: builtin.assert } }
  outputs: { total: "${{ tasks.stash.output.output.n }}" }
  tasks:
    - { id: stash, uses: "action:put", with: { n: "${{ inputs.count }}", label: "n=${{ inputs.count }}", meta: "${{ inputs.meta }}" } }
    - { id: gate, uses: "action:check", needs: [stash], with: { that: "${{ tasks.stash.output.output.meta.ok == true }}", message: bad } }
""",
    "e2": HEAD
    + """metadata: { name: e2 }
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
""",
    "e3": HEAD
    + """metadata: { name: e3 }
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
""",
    "e4": HEAD
    + """metadata: { name: e4 }
spec:
  actions: { step: { kind: builtin.assign } }
  outputs: { runs: "${{ tasks.poll.output.iterations }}" }
  tasks:
    - { id: poll, uses: "action:step", loop: { maxIterations: 4, while: "${{ vars.loopIndex < 3 }}", initial: { n: 0 } },
        with: { i: "${{ vars.loopIndex }}", prev: "${{ vars.loopPrevious }}" } }
""",
    "e5": HEAD
    + """metadata: { name: e5 }
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
""",
    "e6": HEAD
    + """metadata: { name: e6 }
spec:
  policy: { writableRoots: [out] }
  actions: { save: { kind: builtin.write } }
  tasks: [ { id: save, uses: "action:save", with: { path: out/a.txt, content: hello } } ]
""",
    "e7": HEAD
    + """metadata: { name: e7 }
spec:
  policy: { approval: never, writableRoots: [out] }
  actions: { save: { kind: builtin.write }, check: { kind: builtin.assert } }
  tasks:
    - { id: make, uses: "action:save", with: { path: out/r.txt, content: made },
        compensate: { uses: "action:save", with: { path: out/r.txt, content: undone }, retry: { maxAttempts: 2 } } }
    - { id: verify, uses: "action:check", needs: [make], with: { that: false, message: boom } }
""",
    "e8": HEAD
    + """metadata: { name: e8 }
spec:
  runtime: { budgets: { maxProviderRequests: 2, maxTasks: 2 } }
  providers: { sim: { kind: fake } }
  agents: { w: { provider: sim, model: m, instructions: echo, maxTurns: 1, providerOptions: { failFirst: 1 } } }
  tasks:
    - { id: first, uses: "agent:w", with: { prompt: one }, retry: { maxAttempts: 2 } }
    - { id: second, uses: "agent:w", needs: [first], with: { prompt: two } }
""",
    "e9": HEAD
    + """metadata: { name: e9 }
spec:
  policy: { approval: never, processAllowlist: [echo] }
  actions: { hello: { kind: builtin.shell.exec, command: /bin/echo, args: [hi], timeoutSeconds: 5, stdoutLimitBytes: 1024 } }
  tasks: [ { id: run, uses: "action:hello" } ]
""",
}


def load(name: str) -> LoadedWorkflow:
    return load_workflow(EXAMPLES[name], f"{name}.yaml")


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_loads_and_round_trips(name: str) -> None:
    loaded = load(name)
    assert loaded.document["metadata"]["name"] == name
    assert loaded.file == f"{name}.yaml"
    assert loaded.warnings == []
    # The normalized document is itself a valid document and normalizes to itself.
    again = load_workflow(json.dumps(loaded.document))
    assert again.document == loaded.document


def test_workflow_defaults_are_filled_in() -> None:
    spec = load("e1").document["spec"]
    assert spec["runtime"]["maxConcurrency"] == 1
    assert spec["runtime"]["defaultTimeoutSeconds"] == 120
    assert spec["policy"]["approval"] == "mutations"
    assert spec["policy"]["nonInteractive"] == "pause"
    assert spec["policy"]["writableRoots"] == []
    assert spec["policy"]["network"]["allowedSchemes"] == ["https", "http"]
    assert spec["policy"]["network"]["connectTimeoutSeconds"] == 10
    assert spec["policy"]["network"]["maxResponseBytes"] == 8_388_608
    assert spec["compensation"] == {"onFailure": "manual", "approval": "policy"}
    assert spec["memory"]["working"] == {}
    assert spec["memory"]["longTerm"]["namespace"] == "default"
    assert spec["memory"]["longTerm"]["embedding"]["dimensions"] == 64
    assert spec["output"] == {"verbose": False, "showDiff": True}
    assert spec["runtime"]["budgets"]["maxTasks"] is None


def test_task_defaults_and_absent_optionals() -> None:
    stash, gate = load("e1").document["spec"]["tasks"]
    assert stash["retry"] == {"maxAttempts": 1, "backoffMs": 0}
    assert stash["needs"] == [] and gate["needs"] == ["stash"]
    assert stash["failure"] == "stop"
    assert stash["memoryWrites"] == [] and stash["vars"] == {}
    for key in ("when", "foreach", "matrix", "loop", "route", "compensate"):
        assert stash[key] is None
    assert stash["outputSchema"] is None and stash["timeoutSeconds"] is None
    assert stash["with"]["n"] == "${{ inputs.count }}"
    assert load("e1").document["spec"]["inputs"] == {"count": 3, "meta": {"ok": True}}


def test_output_block_present_without_show_diff_is_false() -> None:
    source = EXAMPLES["e1"].replace("spec:\n", "spec:\n  output: { verbose: true }\n", 1)
    assert load_workflow(source).document["spec"]["output"] == {"verbose": True, "showDiff": False}


def test_agent_tool_and_router_example() -> None:
    spec = load("e2").document["spec"]
    scout = spec["agents"]["scout"]
    assert (scout["maxTurns"], scout["maxToolCalls"], scout["maxOutputTokens"]) == (2, 1, 2048)
    assert scout["timeoutSeconds"] == 120 and scout["stream"] is False
    assert scout["providerOptions"]["finalText"] == '{"verdict":"go"}'
    peek = spec["tools"]["peek"]
    assert peek["approval"] == "policy" and peek["secrets"] == []
    pick = spec["tasks"][2]
    assert pick["route"]["cases"] == [{"equals": "go", "tasks": ["publish"]}]
    assert pick["route"]["default"] == ["shelve"]
    assert spec["providers"]["sim"]["endpoint"] is None


def test_expansion_loop_and_subworkflow_examples() -> None:
    fan, build = load("e3").document["spec"]["tasks"][2:4]
    assert fan["foreach"] == {"items": ["dev", "prod"], "as": "env", "maxItems": 2}
    assert build["matrix"]["axes"] == {"os": ["linux", "mac"], "arch": ["amd64", "arm64"]}
    loop = load("e4").document["spec"]["tasks"][0]["loop"]
    assert loop == {"maxIterations": 4, "while": "${{ vars.loopIndex < 3 }}", "initial": {"n": 0}}
    shout = load("e5").document["spec"]["subworkflows"]["shout"]
    assert shout["version"] == "0.1.0" and shout["tasks"][0]["retry"]["maxAttempts"] == 1


def test_compensation_budget_and_process_examples() -> None:
    make = load("e7").document["spec"]["tasks"][0]
    assert make["compensate"]["retry"] == {"maxAttempts": 2, "backoffMs": 0}
    assert make["compensate"]["timeoutSeconds"] is None
    budgets = load("e8").document["spec"]["runtime"]["budgets"]
    assert (budgets["maxProviderRequests"], budgets["maxTasks"]) == (2, 2)
    assert load("e8").document["spec"]["tasks"][0]["retry"]["maxAttempts"] == 2
    spec = load("e9").document["spec"]
    hello = spec["actions"]["hello"]
    assert hello["stdoutLimitBytes"] == 1024
    assert hello["stderrLimitBytes"] == 1024 * 1024
    assert hello["combinedOutputLimitBytes"] == 2 * 1024 * 1024
    assert hello["isolation"] == "process" and hello["env"] == {}
    # Process-only keys stay absent (None) on a non-process action.
    put = load("e1").document["spec"]["actions"]["put"]
    assert put["stdoutLimitBytes"] is None and put["command"] is None


def test_v1_api_version_is_accepted() -> None:
    source = EXAMPLES["e1"].replace("agentctl.dev/v1alpha1", "agentctl.dev/v1")
    assert load_workflow(source).document["apiVersion"] == "agentctl.dev/v1"


def test_provider_defaults_and_secret_references() -> None:
    source = (
        HEAD
        + """metadata: { name: p }
spec:
  policy: { secretFileRoots: [/run/secrets], secretProcessAllowlist: [pass] }
  providers:
    o: { kind: openai }
    a: { kind: anthropic, credential: { file: /run/secrets/a } }
    g: { kind: google, headers: { X-Key: { process: { command: /usr/bin/pass, args: [k] } } } }
  tasks: [ { id: t, uses: "action:x" } ]
"""
    )
    providers = load_workflow(source).document["spec"]["providers"]
    assert providers["o"]["endpoint"] == "https://api.openai.com/v1/responses"
    assert providers["o"]["credential"] == {"env": "OPENAI_API_KEY"}
    assert providers["a"]["credential"] == {"file": "/run/secrets/a"}
    assert providers["g"]["credential"] == {"env": "GEMINI_API_KEY"}
    assert providers["g"]["headers"]["X-Key"] == {
        "process": {
            "command": "/usr/bin/pass",
            "args": ["k"],
            "timeoutSeconds": 5,
            "outputLimitBytes": 16384,
        }
    }


def test_look_alike_secrets_in_with_stay_plain_data() -> None:
    source = EXAMPLES["e1"].replace(
        'label: "n=${{ inputs.count }}"', "label: { env: 'not a name!' }"
    )
    stash = load_workflow(source).document["spec"]["tasks"][0]
    assert stash["with"]["label"] == {"env": "not a name!"}


def test_yaml_1_1_scalars_stay_strings() -> None:
    source = EXAMPLES["e1"].replace(
        "message: bad", "message: bad, d: 2024-01-01, y: yes, o: off, t: 12:30, n: 010, z: ~"
    )
    gate_with = load_workflow(source).document["spec"]["tasks"][1]["with"]
    assert gate_with["d"] == "2024-01-01"
    assert gate_with["y"] == "yes" and gate_with["o"] == "off"
    assert gate_with["t"] == "12:30"
    # Not YAML 1.1's octal 8, nor the core schema's 10: the original's reader keeps the text.
    assert gate_with["n"] == "010" and gate_with["z"] is None


def test_locate_returns_deepest_known_prefix() -> None:
    loaded = load("e1")
    lines = EXAMPLES["e1"].splitlines()
    line, column = loaded.locate("spec.tasks.1.with.that")  # type: ignore[misc]
    assert lines[line - 1][column - 1 :].startswith('"${{ tasks.stash')
    assert loaded.locate("spec.tasks.1.with.that.deeper.still") == (line, column)
    assert loaded.locate("spec.tasks.1.with.nothing") == loaded.locate("spec.tasks.1.with")
    assert loaded.locate("spec") == (4, 1)  # a block mapping: its key
    assert loaded.locate("") == (1, 1)


LEGACY = """playbook: old
description: legacy form
modules: { put: { kind: builtin.assign } }
defaults: { anything: 1 }
promptCache: { enabled: true }
memory: { working: { initial: { seen: 0 } } }
policy: { approvalMode: auto }
agents:
  h: { heuristic: true, instructions: hi, vendorTemperature: 0.2 }
  w: { instructions: write }
tasks:
  - { id: a, uses: "module:put", with: { x: 1 } }
  - { id: b, uses: "agent:h", needs: [a] }
"""


def test_legacy_playbook_is_translated_with_a_warning() -> None:
    loaded = load_workflow(LEGACY, "old.yaml")
    # One for the document, then one per key it loses, in source order (at that key).
    assert [(w.code, w.severity, w.path, w.line) for w in loaded.warnings] == [
        ("migration_required", "warning", None, 1),
        ("migration_required", "warning", "spec.defaults", 4),
        ("migration_required", "warning", "spec.promptCache", 5),
        ("migration_required", "warning", "spec.agents.h.vendorTemperature", 9),
    ]
    # It names the version `migrate` writes, not another one (the two are the same shape).
    assert "v1alpha1" not in loaded.warnings[0].message
    assert "agentctl.dev/v1 document" in (loaded.warnings[0].help or "")
    doc = loaded.document
    assert doc["metadata"]["name"] == "old" and doc["metadata"]["description"] == "legacy form"
    spec = doc["spec"]
    assert spec["actions"]["put"]["kind"] == "builtin.assign"
    assert spec["tasks"][0]["uses"] == "action:put"
    assert spec["memory"]["working"] == {"seen": 0}
    assert spec["policy"]["approval"] == "mutations"
    assert spec["agents"]["h"]["provider"] == "fake"
    assert spec["agents"]["h"]["model"] == "scripted"
    assert spec["agents"]["w"]["provider"] == "openai"
    assert spec["providers"]["openai"]["credential"] == {"env": "OPENAI_API_KEY"}
    assert spec["providers"]["fake"]["kind"] == "fake"


def test_legacy_keys_dropped_say_where_their_setting_went() -> None:
    source = (
        "playbook: old\npacks: [review, { odd: 1 }]\na2aAgents: { helper: { cardUrl: x } }\n"
        "agents:\n  w: { kind: openai.responses, instructions: hi, baseUrl: x, maxTurn: 2 }\n"
        'tasks: [{ id: b, uses: "agent:w" }]\n'
    )
    warned = {w.path: w for w in load_workflow(source).warnings}
    assert set(warned) == {
        None,
        "spec.packs",
        "spec.a2aAgents",
        "spec.agents.w.baseUrl",
        "spec.agents.w.maxTurn",
    }  # `kind` is read (it picks the provider), not dropped
    assert warned["spec.packs"].message.startswith("legacy `packs` (`review`) dropped")
    assert "spec.a2aPeers" in (warned["spec.a2aAgents"].help or "")
    assert "spec.providers" in (warned["spec.agents.w.baseUrl"].help or "")
    assert (warned["spec.agents.w.maxTurn"].help or "").startswith("did you mean `maxTurns`?")


def test_legacy_keeps_never_and_always_approval() -> None:
    for mode in ("never", "always"):
        doc = load_workflow(LEGACY.replace("approvalMode: auto", f"approvalMode: {mode}")).document
        assert doc["spec"]["policy"]["approval"] == mode


def test_legacy_rejected_forms_point_into_the_legacy_source() -> None:
    source = LEGACY.replace('uses: "agent:h"', 'uses: "team:crew"')
    with pytest.raises(ValidationError) as info:
        load_workflow(source)
    (diag,) = info.value.diagnostics
    assert diag.code == "schema_violation" and diag.path == "spec.tasks.1.uses"
    assert (diag.line, diag.column) == (13, 20)
    unknown = LEGACY.replace("tasks:\n", "bogus: 1\ntasks:\n")
    with pytest.raises(ValidationError) as info:
        load_workflow(unknown)
    # The keys the translation dropped follow the error as warnings (they may explain it).
    diag, *notes = info.value.diagnostics
    assert [n.severity for n in notes] == ["warning"] * 3
    assert (diag.code, diag.path, diag.line, diag.column) == (
        "schema_violation",
        "spec.bogus",
        11,
        1,
    )


def test_errors_name_every_problem_not_only_the_first() -> None:
    source = EXAMPLES["e1"].replace("check: { kind: builtin.assert }", "check: { kind: nope }")
    source = source.replace("needs: [stash]", "needs: stash")
    with pytest.raises(ValidationError) as info:
        load_workflow(source)
    paths = [d.path for d in info.value.diagnostics]
    assert paths == ["spec.actions.check.kind", "spec.tasks.1.needs"]
    assert "2 problems" in info.value.message
