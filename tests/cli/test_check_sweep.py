"""``agentctl check`` sweep: keys that could never take effect, references that could never
resolve, where a problem is reported, and how many of a document's problems one pass reports.

Black box, in a fresh directory, as a user runs it: exit 2 with one error envelope whose
diagnostics point (path, line, column) at what the user wrote; nothing is created.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli

pytestmark = pytest.mark.sqlite_only(reason="check opens no ledger: the language, not a backend")

HEAD = "apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\nmetadata: { name: sweep }\nspec:\n"


def _check(cli: Cli, tmp_path: Path, body: str, rc: int = 2) -> Any:
    (tmp_path / "wf.yaml").write_text(HEAD + body, encoding="utf-8")
    done = cli("--output", "json", "check", "wf.yaml")
    assert done.rc == rc, (done.stdout, done.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wf.yaml"]
    return done.error if rc else done.data


def _at(found: Any) -> list[tuple[str, str, int, int]]:
    return [(d["code"], d["path"], d["line"], d["column"]) for d in found["diagnostics"]]


def test_keys_a_pure_task_or_a_router_cannot_use_are_warnings(cli: Cli, tmp_path: Path) -> None:
    # Valid keys the original accepts (a workflow written for it still passes), never silently
    # ignored: each is a warning at its key, and check exits 0.
    body = """\
  actions: { put: { kind: builtin.assign } }
  tasks:
    - { id: a, uses: "action:put", timeoutSeconds: 5 }
"""
    assert _check(cli, tmp_path, body, rc=0)["valid"] is True
    assert _warnings(cli) == [("spec.tasks.0.timeoutSeconds", 7, 36)]
    router = """\
  actions: { put: { kind: builtin.assign } }
  tasks:
    - { id: a, uses: "action:put" }
    - id: pick
      uses: router
      needs: [a]
      retry: { maxAttempts: 2 }
      outputSchema: { type: object }
      route: { select: "${{ tasks.a.output.status }}", cases: [ { equals: x, tasks: [b] } ] }
    - { id: b, uses: "action:put", needs: [pick] }
"""
    _check(cli, tmp_path, router, rc=0)
    # Its outputSchema is no such key: it replaces the router's fixed contract (spec §4.13).
    assert _warnings(cli) == [("spec.tasks.1.retry", 11, 7)]


def test_a_routers_output_schema_is_its_contract(cli: Cli, tmp_path: Path) -> None:
    # spec §4.13: outputSchema replaces a task's default contract, a router's fixed one
    # included, and a violation fails the task. `check` must not call it ignored.
    router = """\
  actions: { put: { kind: builtin.assign } }
  tasks:
    - { id: a, uses: "action:put", with: { v: go } }
    - id: pick
      uses: router
      needs: [a]
      outputSchema: { type: object, required: [verdict] }
      route: { select: "${{ tasks.a.output.output.v }}", cases: [ { equals: go, tasks: [b] } ] }
    - { id: b, uses: "action:put", needs: [pick] }
"""
    _check(cli, tmp_path, router, rc=0)
    assert _warnings(cli) == []
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 4, (done.stdout, done.stderr)
    message = done.error["error"]["message"]
    assert "pick" in message and "output contract" in message and "verdict" in message
    fits = router.replace("required: [verdict]", "required: [selected, matched]")
    (tmp_path / "wf.yaml").write_text(HEAD + fits, encoding="utf-8")
    assert cli("--output", "json", "run", "wf.yaml").data["state"] == "succeeded"


def _warnings(cli: Cli) -> list[tuple[str, int, int]]:
    done = cli("--output", "json", "check", "wf.yaml")
    found = json.loads(done.stdout)["diagnostics"]
    assert {d["severity"] for d in found} <= {"warning"}, found
    return [(d["path"], d["line"], d["column"]) for d in found]


def test_a_policy_provider_nothing_declares_is_a_warning(cli: Cli, tmp_path: Path) -> None:
    body = """\
  policy: { providers: [sim, ghost] }
  providers: { sim: { kind: fake } }
  actions: { put: { kind: builtin.assign } }
  tasks: [ { id: a, uses: "action:put" } ]
"""
    assert _check(cli, tmp_path, body, rc=0)["valid"] is True  # a shared policy may list more
    assert _warnings(cli) == [("spec.policy.providers.1", 5, 30)]


def test_an_agents_retry_is_a_warning_pointing_to_the_task(cli: Cli, tmp_path: Path) -> None:
    # spec/dsl.md §5: parsed, but only task retry applies; `maxAttempts: 3` there used to do
    # nothing without a word.
    body = """\
  providers: { sim: { kind: fake } }
  agents:
    a: { provider: sim, model: m, instructions: hi, retry: { maxAttempts: 3 } }
  tasks:
    - { id: t, uses: "agent:a", with: { prompt: hi } }
"""
    assert _check(cli, tmp_path, body, rc=0)["valid"] is True
    assert _warnings(cli) == [("spec.agents.a.retry", 7, 53)]
    human = cli("check", "wf.yaml")
    assert human.rc == 0
    assert "put `retry` on the tasks that use `agent:a` instead (`t`)" in human.stderr


def test_a_bad_template_in_action_defaults_points_at_the_action(cli: Cli, tmp_path: Path) -> None:
    body = """\
  actions:
    put:
      kind: builtin.assign
      with: { x: "${{ inputs.nope" }
  tasks:
    - { id: a, uses: "action:put" }
"""
    found = _check(cli, tmp_path, body)
    assert _at(found) == [("invalid_template", "spec.actions.put.with.x", 8, 18)]


def test_one_pass_reports_every_independent_problem(cli: Cli, tmp_path: Path) -> None:
    # A misplaced memoryWrites and an option the fake provider lacks, then a schema error.
    body = """\
  actions: { note: { kind: builtin.read } }
  tasks:
    - { id: first, uses: "action:note", with: { path: a.txt }, memoryWrites: [seen] }
    - { id: second, uses: "action:note", with: { path: b.txt }, retries: 2 }
  providers: { local: { kind: fake } }
  agents: { w: { provider: local, model: m, instructions: go, providerOptions: { store: true } } }
"""
    found = _check(cli, tmp_path, body)
    # The first diagnostic is the one `check` always reported; the rest follow it.
    assert [(code, path) for code, path, _, _ in _at(found)] == [
        ("schema_violation", "spec.tasks.1.retries"),
        ("schema_violation", "spec.tasks.0.memoryWrites"),
        ("unsupported_capability", "spec.agents.w.providerOptions.store"),
    ]
    assert found["error"]["message"].startswith("invalid workflow (3 problems): unknown key")
    dropped = """\
  actions: { put: { kind: builtin.assign } }
  tasks:
    - { id: a, uses: "action:nope" }
    - { id: b, uses: "action:put", needs: [a], with: { x: "${{ tasks.a.output }}" } }
    - { id: c, uses: "action:nope2" }
"""
    found = _check(cli, tmp_path, dropped)
    assert [path for _, path, _, _ in _at(found)] == ["spec.tasks.0.uses", "spec.tasks.2.uses"]


def test_an_empty_memory_writes_list_is_the_default(cli: Cli, tmp_path: Path) -> None:
    # Decision (docs/parity.md): `memoryWrites: []` is the key's own default, the same document
    # as leaving it out — accepted, with the same digests.
    body = """\
  actions: { m: { kind: builtin.memory.write } }
  tasks:
    - { id: a, uses: "action:m", with: { key: k, value: 1 }MORE }
"""
    empty = _check(cli, tmp_path, body.replace("MORE", ", memoryWrites: []"), rc=0)
    absent = _check(cli, tmp_path, body.replace("MORE", ""), rc=0)
    assert empty["planDigest"] == absent["planDigest"]
    assert empty["workflowDigest"] == absent["workflowDigest"]
