"""``--workspace`` bounds the files a workflow declares (spec/cli.md §1; the original's
variables guide, "File origins and read policy").

- ``check``, ``plan`` and ``providers inspect`` take ``--workspace`` (an existing directory,
  else exit 2 and nothing created), as ``run``, ``doctor``, ``retry`` and ``repair`` do;
  ``providers inspect`` also takes ``--var`` / ``--vars-file``;
- a declared ``varsFiles`` / ``instructionsFile`` path is named relative to the workflow
  file and must resolve inside the workspace: with ``--workspace ws`` a file elsewhere in
  ``ws`` (by an absolute path or a symlink beside the workflow) is read; without it, or when
  it lies outside ``ws``, it is ``policy_denied`` (exit 2); a ``..`` segment stays refused;
- the workspace decides only what may be read: the plan digest does not change with it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Cli, CliResult

WF = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: shared-vars }
spec:
  varsFiles: [VARS]
  actions: { put: { kind: builtin.assign } }
  providers: { fake: { kind: fake } }
  tasks:
    - { id: one, uses: "action:put", with: { region: "${{ vars.region }}" } }
"""
AGENT_WF = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: shared-instructions }
spec:
  providers: { fake: { kind: fake } }
  agents: { rev: { provider: fake, model: m, instructionsFile: INSTRUCTIONS } }
  tasks:
    - { id: one, uses: "agent:rev" }
"""
COMPILING = [["check"], ["plan"], ["providers", "inspect"], ["explain"]]


def _layout(tmp_path: Path) -> Path:
    """ws/wf/ holds the workflows and link.yaml, link.md → ws/shared/; outside/ is not in ws."""
    wf, shared, outside = tmp_path / "ws" / "wf", tmp_path / "ws" / "shared", tmp_path / "outside"
    for folder in (wf, shared, outside):
        folder.mkdir(parents=True)
    (shared / "b.yaml").write_text("region: eu\n", encoding="utf-8")
    (shared / "review.md").write_text("Review it.\n", encoding="utf-8")
    (outside / "o.yaml").write_text("region: us\n", encoding="utf-8")
    (wf / "link.yaml").symlink_to(shared / "b.yaml")
    (wf / "link.md").symlink_to(shared / "review.md")
    return wf


def _workflow(tmp_path: Path, written: str, text: str = WF, word: str = "VARS") -> Path:
    wf = _layout(tmp_path)
    written = written.replace("TMP", str(tmp_path))
    (wf / "wf.yaml").write_text(text.replace(word, written), encoding="utf-8")
    return wf / "wf.yaml"


def _denied(done: CliResult) -> str:
    assert done.rc == 2, done.stdout
    (diag,) = done.error["diagnostics"]
    assert diag["code"] == "policy_denied", diag
    return str(diag["message"])


@pytest.mark.parametrize("command", COMPILING)
@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("link.yaml", True),  # a symlink beside the workflow, into ws/shared
        ("TMP/ws/shared/b.yaml", True),
        ("TMP/outside/o.yaml", False),
        ("../shared/b.yaml", False),  # lands in ws, but `..` traversal is refused
    ],
)
def test_a_declared_file_is_read_only_inside_the_workspace(
    cli: Cli, tmp_path: Path, command: list[str], written: str, read: bool
) -> None:
    _workflow(tmp_path, written)
    done = cli("--output", "json", *command, "ws/wf/wf.yaml", "--workspace", "ws")
    if read:
        assert done.rc == 0, done.stderr
    else:
        assert _denied(done).endswith("declared files must lie in the workspace")
    # without --workspace the workflow's directory is the workspace: none of them is in it
    _denied(cli("--output", "json", *command, "ws/wf/wf.yaml"))


def test_an_instructions_file_elsewhere_in_the_workspace_is_read_with_workspace(
    cli: Cli, tmp_path: Path
) -> None:
    _workflow(tmp_path, "link.md", AGENT_WF, "INSTRUCTIONS")
    _denied(cli("--output", "json", "check", "ws/wf/wf.yaml"))
    done = cli("--output", "json", "check", "ws/wf/wf.yaml", "--workspace", "ws")
    assert done.rc == 0, done.stderr


@pytest.mark.parametrize("command", COMPILING)
def test_a_missing_workspace_is_exit_2_and_creates_nothing(
    cli: Cli, tmp_path: Path, command: list[str]
) -> None:
    _workflow(tmp_path, "link.yaml")
    before = sorted(tmp_path.rglob("*"))
    done = cli("--output", "json", *command, "ws/wf/wf.yaml", "--workspace", "nowhere")
    assert done.rc == 2
    assert done.error["error"]["message"] == "--workspace nowhere does not exist"
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize("command", [["check"], ["plan"]])
def test_the_workspace_does_not_change_the_plan_digest(
    cli: Cli, tmp_path: Path, command: list[str]
) -> None:
    _workflow(tmp_path, "link.yaml")
    beside = tmp_path / "ws" / "wf" / "link.yaml"  # a plain file: read whatever the workspace
    beside.unlink()
    beside.write_text("region: eu\n", encoding="utf-8")
    plain = cli("--output", "json", *command, "ws/wf/wf.yaml")
    assert plain.rc == 0, plain.stderr
    for workspace in (".", "ws", "ws/wf"):
        done = cli("--output", "json", *command, "ws/wf/wf.yaml", "--workspace", workspace)
        assert done.data["planDigest"] == plain.data["planDigest"]
        assert str(tmp_path) not in done.stdout


def test_providers_inspect_compiles_with_the_variable_flags(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(WF.replace("varsFiles: [VARS]", "vars: {}"), "utf-8")
    (tmp_path / "v.yaml").write_text("region: eu\n", encoding="utf-8")
    (tmp_path / "bad.yaml").write_text("region: '${{ vars.other }}'\n", encoding="utf-8")
    inspect = ("--output", "json", "providers", "inspect", "wf.yaml")
    for flags in (["--var", 'region="eu"'], ["--vars-file", "v.yaml"]):
        done = cli(*inspect, *flags)
        assert done.rc == 0, done.stderr
        assert [p["name"] for p in done.data["providers"]] == ["fake"]
    # a variable that reads another fails the compile, as it fails `check`
    for flags in (["--var", 'region="${{ vars.other }}"'], ["--vars-file", "bad.yaml"]):
        done = cli(*inspect, *flags)
        assert done.rc == 2, done.stdout
        assert done.error["diagnostics"][0]["code"] == "invalid_template"


def test_run_doctor_retry_and_repair_read_from_the_workspace(cli: Cli, tmp_path: Path) -> None:
    _workflow(tmp_path, "link.yaml")
    db = str(tmp_path / "runs.db")
    _denied(cli("--output", "json", "run", "ws/wf/wf.yaml", "--db", db))
    ran = cli("--output", "json", "run", "ws/wf/wf.yaml", "--db", db, "--workspace", "ws")
    assert ran.rc == 0, ran.stderr
    assert ran.data["output"]["one"]["output"] == {"region": "eu"}
    doctor = cli("--output", "json", "doctor", "ws/wf/wf.yaml", "--db", db, "--workspace", "ws")
    assert doctor.rc == 0, doctor.stderr
    _denied(cli("--output", "json", "doctor", "ws/wf/wf.yaml", "--db", db))
    for kind in ("retry", "repair"):
        args = [kind, "ws/wf/wf.yaml", ran.data["runId"], "--from", "one"]
        args += ["--restart-successful", "--plan", "--db", db]
        _denied(cli("--output", "json", *args))
        planned = cli("--output", "json", *args, "--workspace", "ws")
        assert planned.rc == 0, planned.stderr
