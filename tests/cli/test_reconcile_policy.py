"""How the run's policy judges ``effects reconcile`` of an agent's effects (spec/cli.md §4,
capability ``effect_reconciliation``), through the CLI as a black box on both backends.

The agent of the original's first-agent guide (tests/cli/test_agent_sessions.py) is killed
with one of its effects ``started`` (``AGENTCTL_CRASH_AT``); ``resume`` then finds the effect
uncertain (exit 3), and that is the effect an operator reconciles:

- a tool call whose tool declares ``approval: always`` needs ``--approved`` though the policy
  says ``approval: never`` (the tool's contract adds the requirement, as when the run held it);
- a model call is judged by its provider against a non-empty ``policy.providers``;
- a denial (``toolsDeny``, ``providers``) is refused with exit 4 whatever ``--approved`` says,
  and records nothing: the effect stays uncertain, no reconciliation, no audit event.

A run never starts what its own policy denies, so a denial at reconcile time needs a stored
policy narrower than the one the effect ran under: those tests narrow the run's stored plan
(``LedgerTarget.sql``, portable SQL) after the crash, before reconciling.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.cli.test_agent_sessions import FIXTURE, GUIDE
from tests.clibackend import LedgerTarget
from tests.conftest import Cli

DB = ("--db", "r.db")
POLICY = "policy: { workspaceRoot: ., approval: never }"


def _json(cli: Cli, *args: str, env: dict[str, str] | None = None) -> Any:
    got = cli("--output", "json", *args, *DB, env=env)
    assert got.rc == 0, got.stderr
    return got.data


def _write(tmp_path: Path, old: str, new: str) -> None:
    """The guide's workflow with ``old`` replaced by ``new``, and the file its tool reads."""
    assert old in GUIDE
    (tmp_path / "fixture").mkdir()
    (tmp_path / "fixture" / "service.txt").write_text(FIXTURE, encoding="utf-8")
    (tmp_path / "wf.yaml").write_text(GUIDE.replace(old, new), encoding="utf-8")


def _crash(cli: Cli, hit: int, *args: str) -> None:
    """Run ``args`` until the coordinator has committed ``started`` for the ``hit``-th time."""
    crash = {"AGENTCTL_CRASH_AT": "coordinator.after_started", "AGENTCTL_CRASH_HIT": str(hit)}
    killed = cli("--output", "json", *args, *DB, env=crash)
    assert killed.rc == -9, killed.stderr


def _uncertain(cli: Cli, run_id: str, operation: str) -> str:
    """``resume`` finds the started effect uncertain (exit 3): its id."""
    blocked = cli("--output", "json", "resume", run_id, *DB)
    assert blocked.rc == 3, blocked.stderr
    effects = _json(cli, "effects", "list", run_id)["effects"]
    [effect] = [e for e in effects if e["status"] == "uncertain"]
    assert effect["operation"] == operation
    return str(effect["effectId"])


def _run_id(cli: Cli) -> str:
    [run] = _json(cli, "runs", "list")["runs"]
    return str(run["runId"])


def _reconcile(cli: Cli, effect: str, *flags: str) -> Any:
    args = ("effects", "reconcile", effect, "--status", "not-applied", "--reason", "checked")
    return cli("--output", "json", *args, *flags, *DB)


def _audited(cli: Cli, run_id: str) -> list[Any]:
    audit = _json(cli, "inspect", run_id)["audit"]
    return [a["payload"] for a in audit if a["eventType"] == "effect.reconciled"]


def _narrow(target: LedgerTarget, db: Path, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` in the run's stored plan (compact JSON), wherever it is kept:
    in parts (schema v15) or inline in the documents row."""
    target.sql(db, "UPDATE run_plan_parts SET plan_text = REPLACE(plan_text, ?, ?)", (old, new))
    target.sql(
        db,
        "UPDATE run_documents SET compiled_plan_json = REPLACE(compiled_plan_json, ?, ?)"
        " WHERE compiled_plan_json IS NOT NULL",
        (old, new),
    )
    parts = target.sql(db, "SELECT plan_text FROM run_plan_parts")
    inline = target.sql(db, "SELECT compiled_plan_json FROM run_documents")
    stored = "".join(str(text) for (text,) in [*parts, *inline] if text is not None)
    assert new in stored and old not in stored


def _assert_refused_and_unchanged(cli: Cli, run_id: str, effect: str, says: str) -> None:
    """A denial: exit 4 with or without ``--approved``, and nothing recorded."""
    before = _json(cli, "inspect", run_id)
    for flags in ((), ("--approved",)):
        refused = _reconcile(cli, effect, *flags)
        assert refused.rc == 4, refused.stderr
        message = refused.error["error"]["message"]
        assert "policy denies reconciling this effect (effect_reconciliation)" in message
        assert says in message and "cannot override a denial" in message
        assert "nothing was recorded" in message and refused.stdout == ""
    after = _json(cli, "inspect", run_id)
    assert after["effects"] == before["effects"] and after["audit"] == before["audit"]
    assert after["effectReconciliations"] == []
    seen = _json(cli, "effects", "inspect", effect)
    assert seen["effect"]["status"] == "uncertain" and seen["reconciliations"] == []
    assert cli("resume", run_id, *DB).rc == 3  # still blocked by the same effect


def test_a_tool_declaring_approval_always_needs_approved_to_reconcile_its_call(
    cli: Cli, tmp_path: Path
) -> None:
    # The policy asks no approval; the tool's `approval: always` does, so the run holds the
    # call, and reconciling it asks for that approval too.
    _write(tmp_path, "      approval: never\n", "      approval: always\n")
    held = cli("--output", "json", "run", "wf.yaml", *DB)
    assert held.rc == 3 and held.data["state"] == "paused", held.stderr
    run_id = str(held.data["runId"])
    [approval] = _json(cli, "approvals", "list", run_id)["approvals"]
    assert approval["tool"] == "read_fixture"
    _json(cli, "approvals", "approve", approval["approvalId"], "--reason", "go")
    _crash(cli, 1, "resume", run_id)  # the approved tool call is the first to start
    effect = _uncertain(cli, run_id, "builtin.read")

    refused = _reconcile(cli, effect)
    assert refused.rc == 4, refused.stderr
    message = refused.error["error"]["message"]
    assert "needs approval (tool contract requires approval)" in message
    assert "--approved" in message and "nothing was recorded" in message
    assert _json(cli, "effects", "inspect", effect)["reconciliations"] == []
    assert _audited(cli, run_id) == []

    given = _reconcile(cli, effect, "--approved", "--actor", "ops")
    assert given.rc == 0, given.stderr
    authorization = given.data["authorization"]
    assert authorization["kind"] == "explicit_operator_approval"
    assert authorization["reason"] == "tool contract requires approval"
    assert authorization["actor"] == "ops" and authorization["explicitApproval"] is True
    [payload] = _audited(cli, run_id)
    assert payload["authorization"] == authorization
    # not-applied: the task's fresh attempt calls the tool again, held again for approval.
    again = cli("--output", "json", "resume", run_id, *DB)
    assert again.rc == 3 and again.data["state"] == "paused", again.stderr
    [pending] = _json(cli, "approvals", "list", run_id)["approvals"]
    assert pending["tool"] == "read_fixture" and pending["approvalId"] != approval["approvalId"]


def test_a_model_call_whose_provider_policy_lists_is_reconciled(cli: Cli, tmp_path: Path) -> None:
    _write(tmp_path, POLICY, "policy: { workspaceRoot: ., approval: never, providers: [fake] }")
    _crash(cli, 1, "run", "wf.yaml")  # the agent's first model call started
    run_id = _run_id(cli)
    effect = _uncertain(cli, run_id, "fake")
    done = _reconcile(cli, effect)
    assert done.rc == 0, done.stderr
    assert done.data["authorization"]["kind"] == "policy_allow"
    assert done.data["authorization"]["explicitApproval"] is False
    [payload] = _audited(cli, run_id)
    assert payload["authorization"] == done.data["authorization"]
    resumed = cli("--output", "json", "resume", run_id, *DB)
    assert resumed.rc == 0 and resumed.data["state"] == "succeeded", resumed.stderr


def test_a_model_call_whose_provider_policy_does_not_list_is_refused(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    _write(tmp_path, POLICY, "policy: { workspaceRoot: ., approval: never, providers: [fake] }")
    _crash(cli, 1, "run", "wf.yaml")
    run_id = _run_id(cli)
    effect = _uncertain(cli, run_id, "fake")
    _narrow(ledger_target, tmp_path / "r.db", '"providers":["fake"]', '"providers":["other"]')
    says = "provider 'fake' is not in policy.providers"
    _assert_refused_and_unchanged(cli, run_id, effect, says)


def test_a_tool_policy_denies_by_name_is_refused_and_nothing_changes(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    _write(tmp_path, POLICY, POLICY)
    _crash(cli, 2, "run", "wf.yaml")  # the model call answered; the tool call started
    run_id = _run_id(cli)
    effect = _uncertain(cli, run_id, "builtin.read")
    [call] = _json(cli, "inspect", run_id)["toolCalls"]
    assert call["tool"] == "read_fixture" and call["effectId"] == effect
    _narrow(ledger_target, tmp_path / "r.db", '"toolsDeny":[]', '"toolsDeny":["read_fixture"]')
    _assert_refused_and_unchanged(cli, run_id, effect, "'read_fixture' is in policy.toolsDeny")
