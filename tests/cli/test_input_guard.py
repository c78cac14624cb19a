"""The ``--input`` typo guard (docs/workflow-language.md, "Inputs and outputs"): a KEY is
accepted exactly when the workflow declares it (``spec.inputs``) or reads it with the run's
inputs in scope — in any template or condition the runtime renders against them, ``when``
with or without braces, an agent's ``instructionsFile`` included — and refused (exit 2,
nothing created) when only a sub-workflow definition reads it: a sub-workflow's ``inputs``
are its invocation's, so a run input of that name would be silently ignored. Input names
follow the template path rule (spec/dsl.md §6.1: ``[A-Za-z0-9_-]+``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.test_hostile_input import refused
from tests.conftest import Cli

AUDIT = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: f2 }
spec:
  providers: { sim: { kind: fake } }
  agents: { w: { provider: sim, model: m, instructionsFile: inst.md, maxTurns: 1 } }
  actions: { put: { kind: builtin.assign } }
  subworkflows:
    shout: { version: 0.1.0, inputs: { word: hey }, outputs: { loud: "${{ inputs.word }}" },
             tasks: [ { id: e, uses: "action:put" } ] }
  outputs: { key: "${{ inputs.my-key }}", loud: "${{ tasks.wrap.output.loud }}" }
  tasks:
    - { id: gate, uses: "action:put", when: "inputs.flag == yes" }
    - { id: ask, uses: "agent:w", with: { prompt: go } }
    - { id: wrap, uses: "workflow:shout" }
"""
BASE = '{"my-key": 0, "topic": "dogs", "flag": "no"}'  # every read input, so a run succeeds


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "wf.yaml").write_text(AUDIT, encoding="utf-8")
    (tmp_path / "inst.md").write_text("Write about ${{ inputs.topic }}.\n", encoding="utf-8")
    return tmp_path


def _run(cli: Cli, *flags: str) -> dict[str, object]:
    done = cli("--output", "json", "run", "wf.yaml", "--inputs", BASE, *flags)
    assert done.rc == 0, done.stderr
    data: dict[str, object] = done.data
    return data


def test_a_bare_when_condition_reads_its_input(cli: Cli, ws: Path) -> None:
    data = _run(cli, "--input", "flag=yes")
    shown = cli("--output", "json", "inspect", str(data["runId"]))
    states = {t["taskId"]: t["state"] for t in shown.data["tasks"]}
    assert states["gate"] == "succeeded"  # the value reached the condition: not skipped


def test_repair_checks_its_inputs_against_the_same_reads(cli: Cli, ws: Path) -> None:
    source = str(_run(cli, "--input", "flag=yes")["runId"])
    repair = ("repair", "wf.yaml", source, "--from", "gate", "--restart-successful")
    done = cli("--output", "json", *repair, "--input", "flag=no")
    assert done.rc == 0, done.stderr
    shown = cli("--output", "json", "inspect", done.data["runId"])
    assert {t["taskId"]: t["state"] for t in shown.data["tasks"]}["gate"] == "skipped"
    refused(cli, ws, *repair, "--input", "word=LOUD", needle="nor read by the workflow")


def test_an_instructions_file_reads_its_input(cli: Cli, ws: Path) -> None:
    data = _run(cli, "--input", "topic=cats")
    effects = cli("--output", "json", "effects", "list", str(data["runId"])).data["effects"]
    [call] = [e for e in effects if e["taskId"] == "ask"]
    assert "Write about cats." in str(call["request"]["input"])


@pytest.mark.parametrize("name", ["my-key", "9lives", "_x", "a-"])
def test_any_template_name_is_an_input_name(cli: Cli, ws: Path, name: str) -> None:
    # §6.1's segments: `my-key` and `9lives` are names a template reads, declared or not.
    text = AUDIT.replace("inputs.my-key", f"inputs.{name}")
    (ws / "wf.yaml").write_text(text, encoding="utf-8")
    flags = ("--inputs", '{"topic": "t", "flag": "no"}')
    by_pair = cli("--output", "json", "run", "wf.yaml", *flags, "--input", f"{name}=1")
    assert by_pair.rc == 0, by_pair.stderr
    assert by_pair.data["output"]["key"] == 1
    as_json = f'{{"{name}": 2, "topic": "t", "flag": "no"}}'
    (ws / "in.json").write_text(as_json, encoding="utf-8")
    for given in (("--inputs", as_json), ("--inputs-file", "in.json")):
        by_json = cli("--output", "json", "run", "wf.yaml", *given)
        assert by_json.rc == 0, by_json.stderr
        assert by_json.data["output"]["key"] == 2


def test_a_typo_in_the_inputs_object_is_refused_as_an_input_is(cli: Cli, ws: Path) -> None:
    # One rule for every layer: `--inputs '{"zz": 1}'` was silently dropped where
    # `--input zz=1` was refused. run, submit, retry and repair; nothing is created.
    source = str(_run(cli)["runId"])
    typo = BASE.replace('"flag"', '"flgg"')
    (ws / "in.json").write_text(typo, encoding="utf-8")
    commands = (
        ("run", "wf.yaml"),
        ("submit", "wf.yaml"),
        ("retry", "wf.yaml", source, "--from", "gate"),
        ("repair", "wf.yaml", source, "--from", "gate"),
    )
    for command in commands:
        for flag, value in (("--inputs", typo), ("--inputs-file", "in.json")):
            needle = f"{flag} 'flgg' is neither a declared input (spec.inputs) nor read by"
            refused(cli, ws, *command, flag, value, needle=needle)
    (ws / "in.json").write_text('{"word": "LOUD"}', encoding="utf-8")
    needle = "inputs.word in spec.subworkflows (`shout`) is an input of the invocation"
    refused(cli, ws, "run", "wf.yaml", "--inputs-file", "in.json", needle=needle)


@pytest.mark.parametrize("pair", ["a.b=1", "a b=1", "é=1", "a/b=1"])
def test_a_name_no_template_can_read_is_refused(cli: Cli, ws: Path, pair: str) -> None:
    refused(cli, ws, "run", "wf.yaml", "--input", pair, needle="is not a valid input name")


def test_an_input_only_a_subworkflow_definition_reads_is_refused(cli: Cli, ws: Path) -> None:
    # `inputs.word` inside spec.subworkflows is the invocation's input: `--input word=LOUD`
    # never reaches it (the run output stays "hey"), so it is the typo the guard exists for.
    needle = "'word' is neither a declared input (spec.inputs) nor read by the workflow"
    refused(cli, ws, "run", "wf.yaml", "--inputs", BASE, "--input", "word=LOUD", needle=needle)
    result = cli("--output", "json", "run", "wf.yaml", "--input", "word=LOUD")
    message = result.error["error"]["message"]
    assert "inputs.word in spec.subworkflows (`shout`) is an input of the invocation" in message
    assert _run(cli)["output"] == {"key": 0, "loud": "hey"}


HEAD = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: reads }
spec:
  policy: { approval: never, processAllowlist: [echo], writableRoots: [out] }
  providers: { sim: { kind: fake } }
  actions:
    put: { kind: builtin.assign }
    save: { kind: builtin.write, with: { path: out/a.txt, content: a } }
"""
PUT = '- { id: t, uses: "action:put"'
AGENT = "agents: { w: { provider: sim, model: m, maxTurns: 1, "


@dataclass(frozen=True)
class Site:
    """A workflow reading the undeclared run input `x` in one place only: its tasks, more
    spec keys, one more action."""

    tasks: str
    spec: str = ""
    action: str = ""

    def workflow(self) -> str:
        action = f"    {self.action}\n" if self.action else ""
        spec = f"  {self.spec}\n" if self.spec else ""
        return f"{HEAD}{action}{spec}  tasks:\n    {self.tasks}\n"


READ_BY_THE_RUN = {
    "with": Site(PUT + ', with: { v: "${{ inputs.x }}" } }'),
    "vars": Site(PUT + ', vars: { v: "${{ inputs.x }}" } }'),
    "spec vars": Site(PUT + " }", spec='vars: { v: "n=${{ inputs.x }}" }'),
    "bare when": Site(PUT + ', when: "inputs.x == 1" }'),
    "bare not when": Site(PUT + ', when: "not inputs.x" }'),
    "braced when": Site(PUT + ', when: "${{ inputs.x == 1 }}" }'),
    "router select": Site(
        '- { id: r, uses: router, route: { select: "${{ inputs.x }}", cases: '
        "[ { equals: 1, tasks: [t] } ] } }\n    " + PUT + ", needs: [r] }"
    ),
    "foreach items": Site(PUT + ', foreach: { items: ["${{ inputs.x }}"] } }'),
    "matrix axis": Site(PUT + ', matrix: { axes: { a: ["${{ inputs.x }}"] } } }'),
    "loop guard": Site(PUT + ', loop: { maxIterations: 2, while: "${{ inputs.x == 0 }}" } }'),
    "loop initial": Site(
        PUT + ', loop: { maxIterations: 1, while: "${{ vars.loopIndex == 0 }}", '
        'initial: "${{ inputs.x }}" } }'
    ),
    "action args": Site(
        '- { id: t, uses: "action:echo" }',
        action='echo: { kind: builtin.shell.exec, command: echo, args: ["${{ inputs.x }}"] }',
    ),
    "action with": Site(
        '- { id: t, uses: "action:note" }',
        action='note: { kind: builtin.write, with: { path: out/n, content: "x=${{ inputs.x }}" } }',
    ),
    "compensation": Site(
        '- { id: t, uses: "action:save", compensate: '
        '{ uses: "action:save", with: { content: "x=${{ inputs.x }}" } } }'
    ),
    "instructions": Site(
        '- { id: t, uses: "agent:w", with: { prompt: go } }',
        spec=AGENT + 'instructions: "on ${{ inputs.x }}" } }',
    ),
    "agent vars": Site(
        '- { id: t, uses: "agent:w", with: { prompt: go } }',
        spec=AGENT + 'vars: { v: "${{ inputs.x }}" }, instructions: "on ${{ vars.v }}" } }',
    ),
    "spec outputs": Site(PUT + " }", spec='outputs: { o: "${{ inputs.x }}" }'),
    "invocation with": Site(
        '- { id: t, uses: "workflow:s", with: { word: "${{ inputs.x }}" } }',
        spec="subworkflows: { s: { version: 0.1.0, inputs: { word: hey }, tasks: "
        '[ { id: e, uses: "action:put", with: { w: "${{ inputs.word }}" } } ] } }',
    ),
}


@pytest.mark.parametrize("where", sorted(READ_BY_THE_RUN))
def test_an_input_read_anywhere_the_run_renders_is_accepted(
    cli: Cli, tmp_path: Path, where: str
) -> None:
    (tmp_path / "wf.yaml").write_text(READ_BY_THE_RUN[where].workflow(), encoding="utf-8")
    assert cli("--output", "json", "check", "wf.yaml").rc == 0
    done = cli("--output", "json", "run", "wf.yaml", "--check", "--input", "x=1")
    assert done.rc == 0, done.stderr


SUB = """\
  subworkflows:
    s:
      version: 0.1.0
      inputs: { x: 1 }
      outputs: { o: "${{ inputs.x }}" }
      tasks:
        - { id: e, uses: "action:put", when: "inputs.x == 1", vars: { v: "${{ inputs.x }}" },
            with: { w: "${{ inputs.x }}" } }
  tasks:
    - { id: t, uses: "workflow:s" }
"""


def test_inputs_a_subworkflow_definition_reads_are_not_run_inputs(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(HEAD + SUB, encoding="utf-8")
    needle = "inputs.x in spec.subworkflows (`s`) is an input of the invocation"
    refused(cli, tmp_path, "run", "wf.yaml", "--input", "x=2", needle=needle)
    given = SUB.replace('"workflow:s" }', '"workflow:s", with: { x: 2 } }')
    (tmp_path / "wf.yaml").write_text(HEAD + given, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml")  # the way to set it: the invocation's `with`
    assert done.rc == 0, done.stderr
    assert done.data["output"]["t"] == {"o": 2}
