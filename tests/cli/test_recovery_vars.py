"""``retry`` and ``repair`` take ``run``'s variable flags (spec/cli.md §1 "+ run-style flags";
spec/dsl.md §6.4: CLI ``--vars-file`` then ``--var K=JSON`` are a task's top variable layers).

The target workflow is compiled as ``run`` compiles it, so a run started with ``--var`` is
retried with the same ``--var`` and its tasks are reused (bad variable flags are refused with
``run``'s message, exit 2, creating nothing: tests/cli/test_recovery_inputs.py checks them with
the input flags). Without them, the refusal of a task that the source compiled with other
variable values says so, and what to pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Cli

FLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: vw }
spec:
  inputs: { ok: false }
  vars: { tier: silver }
  policy: { approval: never, writableRoots: [out] }
  actions:
    save: { kind: builtin.write }
    check: { kind: builtin.assert }
  tasks:
    - { id: make, uses: action:save, with: { path: out/f.txt, content: "${{ vars.tier }}" } }
    - { id: verify, uses: action:check, needs: [make], with: { that: "${{ inputs.ok }}", message: boom } }
"""

# The flags a retry is asked with after a source run started with ``--var tier='"gold"'``:
# the same value given by --var, by a --vars-file, or by both (--var over the file, as on run).
SAME = [
    pytest.param(("--var", 'tier="gold"'), id="var"),
    pytest.param(("--vars-file", "gold.yaml"), id="vars-file"),
    pytest.param(("--vars-file", "bronze.yaml", "--var", 'tier="gold"'), id="var-over-file"),
]


def _failed_source(cli: Cli, tmp_path: Path) -> str:
    (tmp_path / "wf.yaml").write_text(FLOW)
    (tmp_path / "gold.yaml").write_text("tier: gold\n")
    (tmp_path / "bronze.yaml").write_text("tier: bronze\n")
    ran = cli("--output", "json", "run", "wf.yaml", "--var", 'tier="gold"', "--db", "r.db")
    assert ran.rc == 4, ran.stderr
    assert (tmp_path / "out" / "f.txt").read_text() == "gold"
    return str(ran.error["error"]["runId"])


def _runs(cli: Cli) -> list[str]:
    listed = cli("--output", "json", "runs", "list", "--db", "r.db")
    assert listed.rc == 0, listed.stderr
    return sorted(r["runId"] for r in listed.data["runs"])


@pytest.mark.parametrize("given", SAME)
def test_retry_with_the_source_runs_variables_reuses_the_task_they_rendered(
    cli: Cli, tmp_path: Path, given: tuple[str, ...]
) -> None:
    source = _failed_source(cli, tmp_path)
    args = ("retry", "wf.yaml", source, "--failed", "--input", "ok=true", *given)
    done = cli("--output", "json", *args, "--db", "r.db")
    assert done.rc == 0, done.stderr
    assert (done.data["reusedTasks"], done.data["executedTasks"]) == (["make"], ["verify"])
    assert done.data["output"]["make"]["after"] == "gold"


def test_repair_takes_the_variable_flags_and_a_changed_value_reruns_its_task(
    cli: Cli, tmp_path: Path
) -> None:
    source = _failed_source(cli, tmp_path)
    args = ("repair", "wf.yaml", source, "--from", "verify", "--input", "ok=true", "--db", "r.db")
    same = cli("--output", "json", *args, "--var", 'tier="gold"')
    assert same.rc == 0, same.stderr
    assert same.data["reusedTasks"] == ["make"]
    # Another value is a changed definition: the task reading it executes as a root.
    other = ("--from", "make", "--restart-successful", "--vars-file", "bronze.yaml")
    changed = cli("--output", "json", *args, *other)
    assert changed.rc == 0, changed.stderr
    assert changed.data["executedTasks"] == ["make", "verify"]
    assert (tmp_path / "out" / "f.txt").read_text() == "bronze"


def test_a_retry_without_the_sources_variables_says_what_to_pass(cli: Cli, tmp_path: Path) -> None:
    source = _failed_source(cli, tmp_path)
    args = ("retry", "wf.yaml", source, "--failed", "--input", "ok=true", "--db", "r.db")
    refused = cli("--output", "json", *args)
    assert refused.rc == 3, refused.stderr
    [block] = refused.data["blockedReuse"]
    assert (block["taskId"], block["rule"]) == ("make", "definition_fingerprint_mismatch")
    assert block["message"] == (
        f"the definition of task make changed since run {source}: the workflow is the same "
        "but its variables differ in tier, so that run was compiled with other "
        "--var/--vars-file values (or var files edited since); give the same "
        "--var/--vars-file values as that run to reuse the task"
    )
    assert _runs(cli) == [source]
    # A changed workflow may have changed the variables itself: nothing is said of the flags.
    (tmp_path / "wf.yaml").write_text(FLOW.replace("message: boom", "message: bust"))
    repair = ("repair", "wf.yaml", source, "--from", "verify", "--plan", "--db", "r.db")
    changed = cli("--output", "json", *repair)
    assert changed.rc == 3, changed.stderr
    [block] = changed.data["blockedReuse"]
    assert block["message"] == f"the definition of task make changed since run {source}"
