"""Reuse of structured agents (issue 14 item 9), through the CLI in a fresh directory.

An agent task whose agent declares ``structuredOutput`` has an output contract (spec/dsl.md
§4.13), so ``retry --from X --restart-successful`` and ``repair`` reuse its recorded output for
the tasks it feeds instead of refusing it as ``missing_output_contract``; no model call is made
again. An agent without one is still refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.clibackend import LedgerTarget
from tests.conftest import Cli

FLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: structured }
spec:
  providers: { sim: { kind: fake } }
  agents:
    scout:
      provider: sim
      model: m
      instructions: Decide.
      structuredOutput: { type: object, properties: { verdict: { type: string } }, required: [verdict] }
      providerOptions: { finalText: '{"verdict":"go"}' }
  actions: { check: { kind: builtin.assert } }
  tasks:
    - { id: scan, uses: "agent:scout", with: { prompt: decide } }
    - { id: gate, uses: "action:check", needs: [scan], with: { that: "${{ tasks.scan.output.verdict == 'go' }}", message: MESSAGE } }
"""


def _run(cli: Cli, tmp_path: Path, text: str) -> tuple[Path, str]:
    wf = tmp_path / "wf.yaml"
    wf.write_text(text.replace("MESSAGE", "first"), encoding="utf-8")
    first = cli("--output", "json", "run", str(wf), "--db", "s.db")
    assert first.rc == 0, first.stderr
    return wf, str(first.data["runId"])


def _model_effects(cli: Cli, run_id: str) -> list[Any]:
    got = cli("--output", "json", "inspect", run_id, "--db", "s.db")
    assert got.rc == 0, got.stderr
    return [e for e in got.data["effects"] if e["operation"] == "fake"]


def test_retry_from_a_successful_task_reuses_the_structured_agent(cli: Cli, tmp_path: Path) -> None:
    wf, source = _run(cli, tmp_path, FLOW)
    args = ("retry", str(wf), source, "--from", "gate", "--restart-successful", "--db", "s.db")
    plan = cli("--output", "json", *args, "--plan")
    assert plan.rc == 0, plan.stdout + plan.stderr
    assert plan.data["blockedReuse"] == [] and plan.data["reusedTasks"] == ["scan"]
    done = cli("--output", "json", *args)
    assert done.rc == 0, done.stderr
    assert done.data["reusedTasks"] == ["scan"] and done.data["executedTasks"] == ["gate"]
    assert len(_model_effects(cli, source)) == 1
    assert _model_effects(cli, done.data["runId"]) == []


def test_repair_reuses_the_structured_agent_for_a_corrected_task(cli: Cli, tmp_path: Path) -> None:
    wf, source = _run(cli, tmp_path, FLOW)
    wf.write_text(FLOW.replace("MESSAGE", "corrected"), encoding="utf-8")
    done = cli(
        "--output",
        "json",
        *("repair", str(wf), source, "--from", "gate", "--restart-successful", "--db", "s.db"),
    )
    assert done.rc == 0, done.stderr
    assert done.data["reusedTasks"] == ["scan"] and done.data["state"] == "succeeded"
    assert _model_effects(cli, done.data["runId"]) == []


def test_an_agent_without_structured_output_is_still_refused(cli: Cli, tmp_path: Path) -> None:
    plain = FLOW.replace(
        "      structuredOutput: { type: object, properties: { verdict: { type: string } }, required: [verdict] }\n",
        "",
    ).replace("${{ tasks.scan.output.verdict == 'go' }}", "${{ tasks.scan.output.text != '' }}")
    wf, source = _run(cli, tmp_path, plain)
    got = cli(
        "--output",
        "json",
        *("retry", str(wf), source, "--from", "gate", "--restart-successful", "--db", "s.db"),
    )
    assert got.rc == 3
    (block,) = got.data["blockedReuse"]
    assert block["taskId"] == "scan" and block["rule"] == "missing_output_contract"


def _fingerprint(cli: Cli, run_id: str, task_id: str) -> str:
    got = cli("--output", "json", "inspect", run_id, "--db", "s.db")
    (task,) = [t for t in got.data["tasks"] if t["taskId"] == task_id]
    return str(task["outputContractFingerprint"])


def test_a_changed_structured_output_is_an_output_contract_mismatch(
    cli: Cli, tmp_path: Path
) -> None:
    """``structuredOutput`` is the agent's output contract (spec/dsl.md §4.13): changing it
    blocks reuse under the rule that says so, which spec/cli.md §5 checks before the
    definition fingerprint; the recorded contract is the schema's, not the default's."""
    wf, source = _run(cli, tmp_path, FLOW)
    assert _fingerprint(cli, source, "scan") != _fingerprint(cli, source, "gate")
    wider = FLOW.replace(
        "properties: { verdict: { type: string } }",
        "properties: { verdict: { type: string }, why: { type: string } }",
    )
    wf.write_text(wider.replace("MESSAGE", "first"), encoding="utf-8")
    args = ("repair", str(wf), source, "--from", "gate", "--restart-successful", "--db", "s.db")
    plan = cli("--output", "json", *args, "--plan")
    assert plan.rc == 3, plan.stdout + plan.stderr
    (block,) = plan.data["blockedReuse"]
    assert block["taskId"] == "scan" and block["rule"] == "output_contract_mismatch"


def test_a_run_recorded_with_the_default_contract_is_still_reused(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    """Runs recorded before the agent's schema counted as its contract stored the default
    contract's fingerprint; with the agent unchanged (its definition fingerprint, which
    covers the schema, still matches) they are reused as before."""
    wf, source = _run(cli, tmp_path, FLOW)
    default = _fingerprint(cli, source, "gate")  # an action task: the default contract
    ledger_target.sql(
        tmp_path / "s.db",
        "UPDATE task_states SET output_contract_fingerprint = ? WHERE run_id = ? AND task_id = ?",
        (default, source, "scan"),
    )
    args = ("retry", str(wf), source, "--from", "gate", "--restart-successful", "--db", "s.db")
    plan = cli("--output", "json", *args, "--plan")
    assert plan.rc == 0, plan.stdout + plan.stderr
    assert plan.data["reusedTasks"] == ["scan"]
