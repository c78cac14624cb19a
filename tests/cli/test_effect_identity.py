"""Every recorded effect's identity is the one its own row determines (seeds: the effect id is
derived from run, task, attempt, ordinal, operation and the input's digest; the idempotency
key handed out equals it).

The coordinator computes the identity once and the ledger stores it as given (no second
hash), so this checks the stored rows of a real run against the rule, recomputed here.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from agentctl.core.effects import effect_id
from tests.clibackend import LedgerTarget
from tests.conftest import Cli

WF = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: identities }
spec:
  policy: { approval: never, processAllowlist: [echo] }
  actions:
    put: { kind: builtin.memory.write }
    say: { kind: builtin.shell.exec, command: /bin/echo, args: ["hi"] }
  tasks:
    - { id: a, uses: action:put, with: { key: k, value: 1 } }
    - { id: b, uses: action:put, needs: [a], with: { key: k, value: 2 } }
    - { id: c, uses: action:say, needs: [b] }
"""


def test_each_stored_effect_id_is_derived_from_its_own_row(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    (tmp_path / "wf.yaml").write_text(WF, encoding="utf-8")
    ran = cli("--output", "json", "run", "wf.yaml", "--db", "s/r.db")
    assert ran.rc == 0 and ran.data["state"] == "succeeded", ran
    rows = ledger_target.sql(
        tmp_path / "s" / "r.db",
        "SELECT effect_id, run_id, task_id, attempt, ordinal, operation, input_digest,"
        " idempotency_key, request_json FROM effects ORDER BY task_id",
    )
    assert [r[2] for r in rows] == ["a", "b", "c"]
    for eid, run_id, task, attempt, ordinal, operation, digest, key, request in rows:
        assert digest == hashlib.sha256(str(request).encode()).hexdigest()
        derived = effect_id(str(run_id), str(task), int(attempt), int(ordinal), operation, digest)
        assert eid == derived and key == derived, (task, eid, derived)
