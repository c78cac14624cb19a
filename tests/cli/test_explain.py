"""``agentctl explain FILE``: which layer and source won each task's variables — never a
value or an instruction text — through the CLI in a fresh directory (the original's
variables guide, "Explain and preflight"); nothing is created, a bad workflow is exit 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import Cli

# A value that must never be printed: in a workflow var file, an agent var file, --var,
# --vars-file and an instruction file.
SECRET = "zq-distinctive-7731"

GUIDE = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata:
  name: variable-precedence
spec:
  inputs:
    build: fixture-001
  varsFiles: [defaults.yaml]
  vars:
    replicas: 3
  actions:
    report:
      kind: builtin.assign
  tasks:
    - id: report
      uses: action:report
      vars:
        environment: qa
      with:
        environment: "${{ vars.environment }}"
        replicas: "${{ vars.replicas }}"
        build: "${{ inputs.build }}"
  outputs:
    report: "${{ tasks.report.output.output }}"
"""

AGENTS = f"""\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{ name: agent-origins }}
spec:
  varsFiles: [defaults.yaml]
  providers: {{ sim: {{ kind: fake }} }}
  agents:
    talk: {{ provider: sim, model: m, instructionsFile: talk.md, maxTurns: 1,
      varsFiles: [agent.yaml], vars: {{ tone: "{SECRET}-inline" }} }}
  actions: {{ put: {{ kind: builtin.assign }} }}
  tasks:
    - id: ask
      uses: agent:talk
      varsFiles: [task.yaml]
      with: {{ prompt: "${{{{ vars.tone }}}} ${{{{ vars.region }}}} ${{{{ vars.environment }}}}" }}
    - id: each
      uses: action:put
      foreach: {{ items: [a, b] }}
      with: {{ v: "${{{{ vars.environment }}}}" }}
"""


def _guide(tmp_path: Path) -> None:
    (tmp_path / "defaults.yaml").write_text("environment: staging\nreplicas: 2\n")
    (tmp_path / "workflow.yaml").write_text(GUIDE, encoding="utf-8")


def _origins(data: dict[str, Any], task: str) -> dict[str, tuple[str, str]]:
    [found] = [t for t in data["tasks"] if t["taskId"] == task]
    return {name: (o["layer"], o["source"]) for name, o in found["variables"].items()}


def test_the_guides_example_names_the_winning_layers(cli: Cli, tmp_path: Path) -> None:
    _guide(tmp_path)
    done = cli("--output", "json", "explain", "workflow.yaml", "--workspace", ".")
    assert done.rc == 0, done.stderr
    data = done.data
    assert data["workflow"] == "variable-precedence"
    checked = cli("--output", "json", "check", "workflow.yaml")
    assert data["planDigest"] == checked.data["planDigest"]
    assert _origins(data, "report") == {
        "environment": ("taskVars", "spec.tasks.0.vars"),
        "replicas": ("workflowVars", "spec.vars"),
    }
    assert [(x["layer"], x["source"], x["names"]) for x in data["layers"]] == [
        ("workflowVarsFiles", "defaults.yaml", ["environment", "replicas"]),
        ("workflowVars", "spec.vars", ["replicas"]),
        ("taskVars", "spec.tasks.0.vars", ["environment"]),
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["defaults.yaml", "workflow.yaml"]


def test_command_line_layers_win_in_their_order(cli: Cli, tmp_path: Path) -> None:
    _guide(tmp_path)
    (tmp_path / "over.yaml").write_text(f"replicas: 7\nenvironment: {SECRET}\n")
    done = cli("--output", "json", "explain", "workflow.yaml", "--var", "replicas=5")
    assert done.rc == 0, done.stderr
    assert _origins(done.data, "report")["replicas"] == ("cliVars", "--var")
    # --var wins over every --vars-file, wherever it stands on the command line.
    both = ("--var", f'replicas="{SECRET}"', "--vars-file", "over.yaml")
    done = cli("--output", "json", "explain", "workflow.yaml", *both)
    assert done.rc == 0, done.stderr
    assert _origins(done.data, "report") == {
        "environment": ("cliVarsFiles", "over.yaml"),
        "replicas": ("cliVars", "--var"),
    }
    human = cli("explain", "workflow.yaml", *both)
    assert human.rc == 0, human.stderr
    assert "cliVarsFiles" in human.stdout and "over.yaml" in human.stdout
    for out in (done, human):
        assert SECRET not in out.stdout + out.stderr


def test_agent_layers_foreach_children_and_instruction_files(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(AGENTS, encoding="utf-8")
    (tmp_path / "defaults.yaml").write_text(f"environment: {SECRET}\nregion: eu\ntone: flat\n")
    (tmp_path / "agent.yaml").write_text(f"region: {SECRET}-agent\n")
    (tmp_path / "task.yaml").write_text("{}\n")
    (tmp_path / "talk.md").write_text(f"Say {SECRET} in ${{{{ vars.tone }}}}.\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    for output in ("json", "human"):
        done = cli("--output", output, "--verbose", "explain", "wf.yaml")
        assert done.rc == 0, done.stderr
        assert SECRET not in done.stdout + done.stderr
    data = cli("--output", "json", "explain", "wf.yaml").data
    assert _origins(data, "ask") == {
        "environment": ("workflowVarsFiles", "defaults.yaml"),
        "region": ("agentVarsFiles", "agent.yaml"),
        "tone": ("agentVars", "spec.agents.talk.vars"),
    }
    assert [t["agent"] for t in data["tasks"] if t["taskId"] == "ask"] == ["talk"]
    children = [t for t in data["tasks"] if t["taskId"].startswith("each--")]
    assert len(children) == 2
    for child in children:
        assert child["variables"]["foreachIndex"] == {
            "layer": "engineBinding",
            "source": "foreach",
        }
        assert child["variables"]["environment"]["layer"] == "workflowVarsFiles"
    [talk] = data["instructions"]
    assert talk["agent"] == "talk" and talk["source"] == "talk.md"
    assert talk["digest"].startswith("sha256:")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_invalid_or_missing_workflow_is_exit_2_and_creates_nothing(
    cli: Cli, tmp_path: Path
) -> None:
    _guide(tmp_path)
    broken = GUIDE.replace("uses: action:report", "uses: action:absent")
    (tmp_path / "broken.yaml").write_text(broken, encoding="utf-8")
    refused = cli("--output", "json", "explain", "broken.yaml")
    checked = cli("--output", "json", "check", "broken.yaml")
    assert (refused.rc, checked.rc) == (2, 2), refused.stderr
    assert refused.error["diagnostics"] == checked.error["diagnostics"]
    missing = cli("--output", "json", "explain", "absent.yaml")
    assert missing.rc == 2 and "Traceback" not in missing.stderr, missing.stderr
    no_file = cli("--output", "json", "explain", "workflow.yaml", "--vars-file", "nope.yaml")
    assert no_file.rc == 2 and "Traceback" not in no_file.stderr, no_file.stderr
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["broken.yaml", "defaults.yaml", "workflow.yaml"]
