"""``effects reconcile --status applied`` holds the result to the task's output contract.

``resume`` delivers an applied result as the task's output, checked against its contract
(``outputSchema``; without one, a JSON object). A result that breaks it used to be recorded,
and records are append-only: the next ``resume`` then failed the run for good. It is refused
at reconcile time (exit 4, the violation named) and nothing is recorded, for each kind of
effect a non-agent task can leave uncertain: a process, a file write, a memory write.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli

DB = ("--db", "s/r.db")
CHAIN = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: chain }
spec:
  policy: { approval: never, processAllowlist: [sleep, echo], writableRoots: [out] }
  actions:
    slow: { kind: builtin.shell.exec, command: /bin/sleep, args: ["30"], timeoutSeconds: 1 }
    save: { kind: builtin.write }
  tasks:
    - { id: s, uses: "action:slow" }
    - { id: t, needs: [s], uses: "action:save",
        with: { path: out/x.txt, content: "${{ tasks.s.output.stdout }}" } }
"""
WRITES = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: writes }
spec:
  policy: { approval: never, writableRoots: [out] }
  actions: { save: { kind: builtin.write }, note: { kind: builtin.memory.write } }
  tasks:
    - { id: t, uses: "action:ACTION", with: WITH, outputSchema: SCHEMA }
"""


def _json(cli: Cli, *args: str) -> Any:
    got = cli("--output", "json", *args, *DB)
    assert got.rc == 0, got.stderr
    return got.data


def _reconcile(cli: Cli, tmp_path: Path, effect: str, result: str) -> Any:
    (tmp_path / "result.json").write_text(result, encoding="utf-8")
    args = ("effects", "reconcile", effect, "--status", "applied", "--reason", "checked")
    return cli("--output", "json", *args, "--result-file", "result.json", *DB)


def _uncertain(cli: Cli, run_id: str) -> str:
    effects = _json(cli, "effects", "list", run_id)["effects"]
    [effect] = [e["effectId"] for e in effects if e["status"] == "uncertain"]
    return str(effect)


def _refused(cli: Cli, tmp_path: Path, effect: str, result: str, says: str) -> None:
    refused = _reconcile(cli, tmp_path, effect, result)
    assert refused.rc == 4, refused.stderr
    message = refused.error["error"]["message"]
    assert "output does not match its output contract" in message and says in message, message
    assert message.endswith("nothing was recorded"), message
    assert _json(cli, "effects", "inspect", effect)["reconciliations"] == []


def test_an_applied_result_that_breaks_the_contract_is_refused_and_resume_still_can(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "wf.yaml").write_text(CHAIN, encoding="utf-8")
    first = cli("--output", "json", "run", "wf.yaml", *DB)
    assert first.rc == 4, first.stderr  # the timed-out sleep left its effect uncertain
    run_id = first.error["error"]["runId"]
    effect = _uncertain(cli, run_id)
    _refused(cli, tmp_path, effect, '"just a string"', "/: expected object, got string")
    audit = _json(cli, "inspect", run_id)["audit"]
    assert [a for a in audit if a["eventType"] == "effect.reconciled"] == []
    # Nothing was recorded: the run still waits for a reconciliation, it did not fail.
    assert cli("resume", run_id, *DB).rc == 3
    done = _reconcile(cli, tmp_path, effect, '{"exitCode": 0, "stdout": "hi", "stderr": ""}')
    assert done.rc == 0, done.stderr
    resumed = cli("--output", "json", "resume", run_id, *DB)
    assert resumed.rc == 0 and resumed.data["state"] == "succeeded", resumed.stderr
    assert (tmp_path / "out" / "x.txt").read_text(encoding="utf-8") == "hi"


CASES = [  # action, its with, the task's outputSchema, a result breaking it, what is said
    ("save", "{ path: out/a.txt, content: x }", "{ required: [path] }", "{}", "'path'"),
    ("note", "{ key: colour, value: blue }", "{ type: object }", "[1]", "got array"),
]


@pytest.mark.parametrize(("action", "given", "schema", "bad", "says"), CASES)
def test_a_write_or_memory_write_result_is_held_to_the_contract(
    cli: Cli, tmp_path: Path, action: str, given: str, schema: str, bad: str, says: str
) -> None:
    text = WRITES.replace("ACTION", action).replace("WITH", given).replace("SCHEMA", schema)
    (tmp_path / "wf.yaml").write_text(text, encoding="utf-8")
    crash = {"AGENTCTL_CRASH_AT": "coordinator.after_started"}
    assert cli("run", "wf.yaml", *DB, env=crash).rc == -9  # killed with the effect started
    [run] = _json(cli, "runs", "list")["runs"]
    assert cli("resume", run["runId"], *DB).rc == 3  # the started effect is now uncertain
    effect = _uncertain(cli, run["runId"])
    _refused(cli, tmp_path, effect, bad, says)
    assert _reconcile(cli, tmp_path, effect, '{"path": "out/a.txt"}').rc == 0
    resumed = cli("--output", "json", "resume", run["runId"], *DB)
    assert resumed.rc == 0 and resumed.data["state"] == "succeeded", resumed.stderr
