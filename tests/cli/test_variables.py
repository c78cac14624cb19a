"""Variables (issue 14 item 1; spec/dsl.md §6.4), through the CLI in a fresh directory.

Precedence low → high: workflow ``varsFiles`` → workflow ``vars`` → agent ``varsFiles`` →
agent ``vars`` → task ``varsFiles`` → task ``vars`` → ``--vars-file`` → ``--var``; and the
limits: files are YAML/JSON mappings (≤ 1 MiB, no chaining), paths are literal and relative
to the workflow file, reserved engine names are refused; every refusal is exit 2 with no
state created.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Cli
from tests.core.compiler_docs import SHARED_VARS

LAYERS = ["wf-file", "wf-vars", "agent-file", "agent-vars", "task-file", "task-vars"]
LAYERS += ["cli-file", "cli-var"]
KEYS = [f"k{i}" for i in range(1, 9)]


def _layer(level: int) -> dict[str, str]:
    """Layer ``level`` sets k<level+1>..k8, so key k<n> is won by layer n-1."""
    return {key: LAYERS[level] for key in KEYS[level:]}


def _workflow() -> str:
    prompt = " ".join(f"${{{{ vars.{key} }}}}" for key in KEYS)
    return f"""\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {{ name: layered }}
spec:
  varsFiles: [vars/workflow.yaml]
  vars: {json.dumps(_layer(1))}
  providers: {{ sim: {{ kind: fake }} }}
  agents:
    talk: {{ provider: sim, model: m, instructions: echo, maxTurns: 1,
      varsFiles: [vars/agent.json], vars: {json.dumps(_layer(3))} }}
  tasks:
    - id: ask
      uses: agent:talk
      varsFiles: [vars/task.yaml]
      vars: {json.dumps(_layer(5))}
      with: {{ prompt: "{prompt}" }}
"""


def _setup(tmp_path: Path) -> None:
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "wf.yaml").write_text(_workflow(), encoding="utf-8")
    vars_dir = tmp_path / "flows" / "vars"  # relative to the workflow file, not the cwd
    vars_dir.mkdir()
    (vars_dir / "workflow.yaml").write_text(json.dumps(_layer(0)), encoding="utf-8")
    (vars_dir / "agent.json").write_text(json.dumps(_layer(2)), encoding="utf-8")
    (vars_dir / "task.yaml").write_text(json.dumps(_layer(4)), encoding="utf-8")
    (tmp_path / "cli.yaml").write_text(json.dumps(_layer(6)), encoding="utf-8")


def test_every_layer_in_precedence_order(cli: Cli, tmp_path: Path) -> None:
    _setup(tmp_path)
    args = ("--vars-file", "cli.yaml", "--var", 'k8="cli-var"', "--var", "k9=[1]")
    done = cli("--output", "json", "run", "flows/wf.yaml", "--db", "db.sqlite", *args)
    assert done.rc == 0, done.stderr
    assert done.data["output"]["ask"]["text"] == "fake: " + " ".join(LAYERS)
    plan = cli("--output", "json", "plan", "flows/wf.yaml", *args)
    assert plan.data["tasks"]["ask"]["vars"]["k9"] == [1]
    without = cli("--output", "json", "plan", "flows/wf.yaml")
    assert without.data["tasks"]["ask"]["vars"]["k8"] == "task-vars"
    # Captured values are part of the plan, so they change its digest.
    assert without.data["planDigest"] != plan.data["planDigest"]


def _refused(cli: Cli, tmp_path: Path, *args: str) -> dict[str, object]:
    got = cli("--output", "json", "run", "flows/wf.yaml", "--db", "db.sqlite", *args)
    assert got.rc == 2, got.stderr
    assert not (tmp_path / "db.sqlite").exists()
    return dict(got.error)


def test_var_file_problems_are_located_at_their_entry(cli: Cli, tmp_path: Path) -> None:
    _setup(tmp_path)
    task_file = tmp_path / "flows" / "vars" / "task.yaml"
    line = _workflow().splitlines().index("      varsFiles: [vars/task.yaml]") + 1
    for text, needle in (
        ("- just a list\n", "must hold a mapping"),
        ("varsFiles: [other.yaml]\n", "never chain"),
        ("include: x\n", "never chain"),
        ("a: 1\n" + "#" * (1024 * 1024), "limit is 1048576 bytes"),
    ):
        task_file.write_text(text, encoding="utf-8")
        error = _refused(cli, tmp_path)
        (diag,) = error["diagnostics"]  # type: ignore[misc]
        assert needle in diag["message"] and diag["path"] == "spec.tasks.0.varsFiles.0"
        assert (diag["line"], diag["column"]) == (line, 19)
    task_file.unlink()
    (diag,) = _refused(cli, tmp_path)["diagnostics"]  # type: ignore[misc]
    assert "does not exist" in diag["message"]


def test_bad_yaml_reserved_names_and_templated_paths(cli: Cli, tmp_path: Path) -> None:
    _setup(tmp_path)
    task_file = tmp_path / "flows" / "vars" / "task.yaml"
    task_file.write_text("a: [unclosed\n", encoding="utf-8")
    (diag,) = _refused(cli, tmp_path)["diagnostics"]  # type: ignore[misc]
    assert diag["code"] == "yaml_syntax" and str(diag["file"]).endswith("task.yaml")
    task_file.write_text("loopIndex: 3\n", encoding="utf-8")
    (diag,) = _refused(cli, tmp_path)["diagnostics"]  # type: ignore[misc]
    assert "reserved" in diag["message"] and diag["path"] == "spec.tasks.0.varsFiles.0"
    wf = tmp_path / "flows" / "wf.yaml"
    wf.write_text(_workflow().replace("vars/task.yaml", '"${{ inputs.f }}"'), encoding="utf-8")
    (diag,) = _refused(cli, tmp_path)["diagnostics"]  # type: ignore[misc]
    assert diag["code"] == "schema_violation" and "literal" in diag["message"]


def test_cli_variables_are_checked(cli: Cli, tmp_path: Path) -> None:
    _setup(tmp_path)
    for args, needle in (
        (("--var", "k8=bare-text"), "is not JSON"),
        (("--var", "k8"), "expected NAME=JSON"),
        (("--var", "k8=NaN"), "contains NaN, which is not valid JSON"),
        (("--var", "matrixIndex=1"), "reserved"),
        (("--var", "k8\n=1"), "expected NAME=JSON"),  # a trailing newline is not a name
        (("--vars-file", "missing.yaml"), "does not exist"),
    ):
        error = _refused(cli, tmp_path, *args)
        assert needle in json.dumps(error), (args, error)


OUTPUTS_WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: outputs-vars }
spec:
  inputs: { build: fixture-001 }
  varsFiles: [defaults.yaml]
  vars: { replicas: 3, label: "${{ inputs.build }}" }
  actions: { report: { kind: builtin.assign } }
  tasks:
    - id: report
      uses: action:report
      vars: { environment: qa }
      with: { environment: "${{ vars.environment }}" }
  outputs:
    environment: "${{ vars.environment }}"
    replicas: "${{ vars.replicas }}"
    label: "${{ vars.label }}"
    task: "${{ tasks.report.output.output.environment }}"
"""


def test_run_outputs_read_the_workflow_level_variables(cli: Cli, tmp_path: Path) -> None:
    """``spec.outputs`` selects "from inputs, memory, variables, or task outputs": it sees the
    workflow's var files and ``vars`` under ``--vars-file``/``--var``, rendered against the
    inputs as a task's are, and the recorded run keeps them for replay."""
    (tmp_path / "defaults.yaml").write_text("environment: staging\nreplicas: 2\n")
    (tmp_path / "wf.yaml").write_text(OUTPUTS_WORKFLOW)
    done = cli("--output", "json", "run", "wf.yaml", "--db", "db.sqlite")
    assert done.rc == 0, done.stderr
    # the task's own ``environment: qa`` is the task's; the run sees the workflow's layers
    expected = {"environment": "staging", "replicas": 3, "label": "fixture-001", "task": "qa"}
    assert done.data["output"] == expected
    replayed = cli("--output", "json", "replay", done.data["runId"], "--db", "db.sqlite")
    assert replayed.rc == 0, replayed.stderr
    assert replayed.data["output"] == expected
    args = ("--var", "replicas=5", "--input", "build=fixture-002")
    again = cli("--output", "json", "run", "wf.yaml", "--db", "db.sqlite", *args)
    assert again.rc == 0, again.stderr
    assert again.data["output"]["replicas"] == 5
    assert again.data["output"]["label"] == "fixture-002"


def test_run_outputs_cannot_read_a_task_s_own_variable(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "defaults.yaml").write_text("replicas: 2\n")
    text = OUTPUTS_WORKFLOW.replace("varsFiles: [defaults.yaml]", "varsFiles: []")
    (tmp_path / "wf.yaml").write_text(text)
    done = cli("--output", "json", "check", "wf.yaml")
    assert done.rc == 2, done.stdout
    message = json.dumps(done.error)
    assert "spec.outputs.environment reads `vars.environment`" in message
    assert "no workflow-level variable defines" in message
    assert not (tmp_path / ".agentctl").exists()


def test_a_workflow_variable_template_error_is_reported_once_at_it(
    cli: Cli, tmp_path: Path
) -> None:
    """Not once per task at a ``spec.tasks.N.vars`` the tasks do not have."""
    for value, help_has in (("${{ inputs.a", None), ("${{ tasks.a.output }}", "need itself")):
        (tmp_path / "wf.yaml").write_text(SHARED_VARS.replace("VALUE", value), encoding="utf-8")
        done = cli("--output", "json", "check", "wf.yaml")
        assert done.rc == 2, done.stdout
        (diag,) = done.error["diagnostics"]
        assert (diag["code"], diag["path"], diag["line"]) == ("invalid_template", "spec.vars.q", 6)
        assert diag["column"] == 8
        assert help_has is None or help_has in diag["help"]


FOREACH_AS = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: x}
spec:
  vars: {x: 99}
  actions: {a: {kind: builtin.assign}}
  tasks: [{id: t, uses: "action:a", foreach: {items: [7], as: x}, with: {v: "${{ vars.x }}"}}]
"""


def test_a_foreach_as_name_set_by_another_layer(cli: Cli, tmp_path: Path) -> None:
    """spec/dsl.md §4.8 reserves the ``as`` name in the task's own vars: a workflow-level or
    command-line value of that name is hidden in the children with a warning, never silently;
    the task's own var file setting it is refused as its inline ``vars`` are."""
    (tmp_path / "wf.yaml").write_text(FOREACH_AS, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--db", "db.sqlite")
    assert done.rc == 0, done.stderr
    assert done.data["output"]["t"]["items"][0]["output"]["output"] == {"v": 7}
    (warning,) = json.loads(done.stdout)["diagnostics"]
    assert (warning["severity"], warning["path"], warning["line"]) == ("warning", "spec.vars.x", 5)
    assert "hidden in the children of task `t`" in warning["message"]
    checked = cli("--output", "json", "check", "wf.yaml", "--var", "x=5")
    assert checked.rc == 0, checked.stderr
    (warning,) = json.loads(checked.stdout)["diagnostics"]
    assert (warning["severity"], warning["path"], warning["file"]) == ("warning", None, None)
    assert warning["message"].startswith("--var x is hidden")
    (tmp_path / "cli.yaml").write_text("x: 3\n", encoding="utf-8")
    from_file = cli("--output", "json", "check", "wf.yaml", "--vars-file", "cli.yaml")
    (warning,) = json.loads(from_file.stdout)["diagnostics"]  # at the file that set it
    assert (warning["file"], warning["path"], warning["line"]) == ("cli.yaml", None, None)
    assert "--vars-file 'cli.yaml' is hidden" in warning["message"]
    (tmp_path / "t.yaml").write_text("x: 99\n", encoding="utf-8")
    own = FOREACH_AS.replace("vars: {x: 99}", "vars: {}").replace(
        "as: x}", "as: x}, varsFiles: [t.yaml]"
    )
    (tmp_path / "wf.yaml").write_text(own, encoding="utf-8")
    refused = cli("--output", "json", "check", "wf.yaml")
    assert refused.rc == 2, refused.stdout
    (diag,) = refused.error["diagnostics"]
    assert (diag["severity"], diag["code"]) == ("error", "schema_violation")
    assert diag["path"] == "spec.tasks.0.varsFiles.0" and "reserved" in diag["message"]
