"""``effects reconcile --result-schema-file`` and ``--approved`` (spec/cli.md §1 table, §4),
and ``effects continue-remote`` refusing such an effect, which is not a remote one.

A shell step past its ``timeoutSeconds`` leaves its effect uncertain (the run parks, exit 4):
the effect an operator then reconciles. What each test checks is what the user sees (exit
code, message, the ``EffectReconciliation`` record) and that a refusal records nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli.test_agent_sessions import FIXTURE, GUIDE
from tests.conftest import Cli

FLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {{ name: parked }}
spec:
  policy: {{ approval: {approval}, processAllowlist: [sh] }}
  actions:
    slow: {{ kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "sleep 30"],
            timeoutSeconds: 1 }}
  tasks:
    - {{ id: s, uses: "action:slow" }}
"""
DB = ("--db", "s/r.db")


def _json(cli: Cli, *args: str) -> Any:
    got = cli("--output", "json", *args, *DB)
    assert got.rc == 0, got.stderr
    return got.data


def _park(cli: Cli, tmp_path: Path, approval: str) -> tuple[str, str]:
    """Run FLOW under ``policy.approval`` until its effect is uncertain: run id, effect id."""
    (tmp_path / "wf.yaml").write_text(FLOW.format(approval=approval), encoding="utf-8")
    first = cli("--output", "json", "run", "wf.yaml", *DB)
    run_id = first.data["runId"] if first.rc == 3 else first.error["error"]["runId"]
    if first.rc == 3:  # the shell step waited for its approval: give it, and run it
        [pending] = _json(cli, "approvals", "list", run_id)["approvals"]
        _json(cli, "approvals", "approve", pending["approvalId"], "--reason", "go")
        assert cli("resume", run_id, *DB).rc == 4
    effects = _json(cli, "effects", "list", run_id)["effects"]
    [effect] = [e["effectId"] for e in effects if e["status"] == "uncertain"]
    return run_id, effect


def _reconcile(cli: Cli, effect: str, status: str, *flags: str) -> Any:
    args = ("effects", "reconcile", effect, "--status", status, "--reason", "checked")
    return cli("--output", "json", *args, *flags, *DB)


def _history(cli: Cli, effect: str) -> list[Any]:
    return list(_json(cli, "effects", "inspect", effect)["reconciliations"])


def _audited(cli: Cli, run_id: str) -> list[Any]:
    audit = _json(cli, "inspect", run_id)["audit"]
    return [a["payload"] for a in audit if a["eventType"] == "effect.reconciled"]


def _file(tmp_path: Path, name: str, text: str) -> str:
    (tmp_path / name).write_text(text, encoding="utf-8")
    return name


def test_a_reconciliation_policy_requires_approval_for_needs_approved(
    cli: Cli, tmp_path: Path
) -> None:
    run_id, effect = _park(cli, tmp_path, "high_risk")
    refused = _reconcile(cli, effect, "not-applied")
    assert refused.rc == 4, refused.stderr
    message = refused.error["error"]["message"]
    assert "needs approval" in message and "--approved" in message
    assert _history(cli, effect) == [] and _audited(cli, run_id) == []

    given = _reconcile(cli, effect, "not-applied", "--approved", "--actor", "ops")
    assert given.rc == 0, given.stderr
    authorization = given.data["authorization"]
    assert authorization["kind"] == "explicit_operator_approval"
    assert authorization["capability"] == "effect_reconciliation"
    assert authorization["actor"] == "ops" and authorization["explicitApproval"] is True
    [record] = _history(cli, effect)
    assert record["status"] == "not_applied"
    # Stored with the record: the audit event that commits in the same transaction.
    [payload] = _audited(cli, run_id)
    assert payload["authorization"] == authorization


def test_what_policy_allows_is_reconciled_without_approved(cli: Cli, tmp_path: Path) -> None:
    run_id, effect = _park(cli, tmp_path, "never")
    # A blank reason or actor is bad input (exit 2), refused before anything is recorded.
    for flags in (("--reason", "  "), ("--reason", "checked", "--actor", "  ")):
        args = ("effects", "reconcile", effect, "--status", "not-applied", *flags)
        blank = cli("--output", "json", *args, *DB)
        assert blank.rc == 2, blank.stderr
        assert f"{flags[-2]} must not be empty" in blank.error["error"]["message"]
    assert _history(cli, effect) == [] and _audited(cli, run_id) == []
    done = _reconcile(cli, effect, "not-applied")
    assert done.rc == 0, done.stderr
    assert done.data["authorization"]["kind"] == "policy_allow"


def test_an_applied_result_is_checked_against_the_result_schema_file(
    cli: Cli, tmp_path: Path
) -> None:
    run_id, effect = _park(cli, tmp_path, "never")
    schema = {"type": "object", "required": ["exitCode"]}
    good = _file(tmp_path, "schema.json", json.dumps(schema))
    cases = [  # (file text, exit code, what the message says)
        ('{"type": "objekt"}', 2, "not a usable JSON Schema"),
        ("{not json", 2, "is not valid JSON"),
        ("null", 2, "bad.json holds null"),  # was taken as no schema at all: nothing checked
    ]
    result = ("--result-file", _file(tmp_path, "result.json", '{"stdout": "x"}'))
    for text, rc, says in cases:
        bad = ("--result-schema-file", _file(tmp_path, "bad.json", text))
        got = _reconcile(cli, effect, "applied", *result, *bad)
        assert got.rc == rc and says in got.error["error"]["message"], got.stderr
    missing = _reconcile(cli, effect, "applied", *result, "--result-schema-file", "none.json")
    assert missing.rc == 2 and "does not exist" in missing.error["error"]["message"]
    broken = _reconcile(cli, effect, "applied", *result, "--result-schema-file", good)
    assert broken.rc == 4, broken.stderr
    assert "breaks --result-schema-file" in broken.error["error"]["message"]
    assert "exitCode" in broken.error["error"]["message"]
    assert _history(cli, effect) == [] and _audited(cli, run_id) == []

    fits = ("--result-file", _file(tmp_path, "fits.json", '{"exitCode": 0}'))
    done = _reconcile(cli, effect, "applied", *fits, "--result-schema-file", good)
    assert done.rc == 0, done.stderr
    assert done.data["result"] == {"exitCode": 0} and done.data["resultSchema"] == schema
    [payload] = _audited(cli, run_id)
    assert payload["resultSchema"] == schema


def test_a_result_schema_file_without_applied_still_checks_a_given_result(
    cli: Cli, tmp_path: Path
) -> None:
    # As in the original: the schema checks whatever --result-file gives, whatever the status;
    # with no result it is only recorded.
    _, effect = _park(cli, tmp_path, "never")
    schema = ("--result-schema-file", _file(tmp_path, "s.json", '{"type": "object"}'))
    result = ("--result-file", _file(tmp_path, "r.json", "[1]"))
    refused = _reconcile(cli, effect, "not-applied", *result, *schema)
    assert refused.rc == 4 and "breaks --result-schema-file" in refused.error["error"]["message"]
    assert _history(cli, effect) == []
    done = _reconcile(cli, effect, "not-applied", *schema)
    assert done.rc == 0, done.stderr
    assert done.data["resultSchema"] == {"type": "object"} and done.data["result"] is None


def test_an_agent_tool_call_is_judged_by_its_tool_name(cli: Cli, tmp_path: Path) -> None:
    # The run allowed `read_fixture` by name (toolsAllow); reconciling its call is judged by
    # the same name, not by the executor's operation (builtin.read), so it is not denied.
    allowed = "policy: { workspaceRoot: ., approval: never, toolsAllow: [read_fixture] }"
    (tmp_path / "fixture").mkdir()
    (tmp_path / "fixture" / "service.txt").write_text(FIXTURE, encoding="utf-8")
    guide = GUIDE.replace("policy: { workspaceRoot: ., approval: never }", allowed)
    assert allowed in guide
    (tmp_path / "wf.yaml").write_text(guide, encoding="utf-8")
    crash = {"AGENTCTL_CRASH_AT": "coordinator.after_started", "AGENTCTL_CRASH_HIT": "2"}
    assert cli("run", "wf.yaml", *DB, env=crash).rc == -9  # killed with the tool call started
    [run] = _json(cli, "runs", "list")["runs"]
    assert cli("resume", run["runId"], *DB).rc == 3  # the started tool call is now uncertain
    [call] = _json(cli, "inspect", run["runId"])["toolCalls"]
    assert call["tool"] == "read_fixture"
    done = _reconcile(cli, call["effectId"], "not-applied")
    assert done.rc == 0, done.stderr
    assert done.data["authorization"]["kind"] == "policy_allow"
    resumed = cli("--output", "json", "resume", run["runId"], *DB)
    assert resumed.rc == 0 and resumed.data["state"] == "succeeded", resumed.stderr


NOT_EVIDENCE = {  # file text → what the refusal says it holds instead of an object
    '["not", "an", "object"]': "not an array",
    '"just text"': "not a string",
    "1": "not an integer",
    "{}": "not an empty object",
    "null": "not null",
}


def test_an_evidence_file_must_hold_a_non_empty_json_object(cli: Cli, tmp_path: Path) -> None:
    # spec/cli.md §4: a reconciliation needs evidence. An empty object or null used to be
    # replaced by the default statement and any other JSON value was recorded as evidence.
    run_id, effect = _park(cli, tmp_path, "never")
    for text, holds in NOT_EVIDENCE.items():
        evidence = ("--evidence-file", _file(tmp_path, "ev.json", text))
        refused = _reconcile(cli, effect, "not-applied", *evidence)
        assert refused.rc == 2, refused.stderr
        message = refused.error["error"]["message"]
        assert "must hold a non-empty JSON object" in message and holds in message, message
    args = ("effects", "reconcile", effect, "--status", "not-applied", "--reason", "checked")
    human = cli(*args, "--evidence-file", "ev.json", *DB)
    assert human.rc == 2 and human.stderr.startswith("error: evidence file ev.json must hold")
    assert _history(cli, effect) == [] and _audited(cli, run_id) == []
    seen = {"kind": "observation", "detail": "no process named sleep ran"}
    evidence = ("--evidence-file", _file(tmp_path, "ev.json", json.dumps(seen)))
    done = _reconcile(cli, effect, "not-applied", *evidence)
    assert done.rc == 0, done.stderr
    assert done.data["evidence"] == seen


def test_an_applied_result_file_holding_null_is_bad_input(cli: Cli, tmp_path: Path) -> None:
    # null is no result: it used to be refused as if --result-file had not been given.
    _, effect = _park(cli, tmp_path, "never")
    refused = _reconcile(cli, effect, "applied", "--result-file", _file(tmp_path, "r.json", "null"))
    assert refused.rc == 2, refused.stderr
    assert "r.json holds null" in refused.error["error"]["message"]
    assert _history(cli, effect) == []
    result = ("--result-file", _file(tmp_path, "r.json", '{"exitCode": 0}'))
    done = _reconcile(cli, effect, "applied", *result)
    assert done.rc == 0 and done.data["result"] == {"exitCode": 0}, done.stderr


def test_continue_remote_refuses_an_effect_that_is_not_remote(cli: Cli, tmp_path: Path) -> None:
    # It said "has no persisted remote task: the submission was ambiguous" (exit 3), as for
    # an a2a.delegate effect whose message may or may not have reached its peer.
    run_id, effect = _park(cli, tmp_path, "never")
    done = cli("--output", "json", "effects", "continue-remote", effect, *DB)
    assert done.rc == 4, done.stderr
    message = done.error["error"]["message"]
    assert f"effect {effect} is a builtin.shell.exec effect" in message
    assert "continue-remote takes a remote agent's effect (a2a.delegate)" in message
    assert "ambiguous" not in message and done.error["error"]["runId"] == run_id
    assert _history(cli, effect) == [] and _audited(cli, run_id) == []
    [listed] = _json(cli, "effects", "list", run_id)["effects"]
    assert listed["status"] == "uncertain"
