"""Legacy ``playbook:`` documents the original's compatibility pages promise to translate.

spec/dsl.md §1 "Legacy": the original's minimum preserved contract (its v0 ``assign`` fixture,
which carries a top-level ``version``) loads, migrates and runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.conftest import Cli

# The shape of the original's fixtures/compat/v0/assign.playbook.yaml.
ASSIGN = """\
playbook: compatibility-assign
version: 0.1.0
inputs:
  message: hello
modules:
  copy:
    kind: builtin.assign
tasks:
  - id: copy
    uses: module:copy
    with:
      message: "${{ inputs.message }}"
"""


def test_the_originals_v0_assign_fixture_checks_migrates_and_runs(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "assign.playbook.yaml").write_text(ASSIGN, encoding="utf-8")
    checked = cli("--output", "json", "check", "assign.playbook.yaml")
    assert checked.rc == 0, checked.stderr
    assert checked.data["workflow"] == "compatibility-assign" and checked.data["tasks"] == 1
    planned = cli("--output", "json", "plan", "assign.playbook.yaml")
    assert planned.rc == 0, planned.stderr
    assert planned.data["order"] == ["copy"]
    task = planned.data["tasks"]["copy"]
    assert (task["kind"], task["action"], task["needs"]) == ("action", "copy", [])
    migrated = cli("--output", "json", "migrate", "assign.playbook.yaml", "--write", "v1.yaml")
    assert migrated.rc == 0, migrated.stderr
    assert migrated.data["migratedLegacy"] is True
    document = yaml.safe_load((tmp_path / "v1.yaml").read_text(encoding="utf-8"))
    # v1 metadata has no version: the playbook's own version is not carried anywhere.
    assert document["metadata"] == {"name": "compatibility-assign"}
    assert "version" not in document["spec"]
    ran = cli("--output", "json", "run", "assign.playbook.yaml", "--db", "r.db")
    assert ran.rc == 0, ran.stderr
    assert ran.data["output"]["copy"]["output"] == {"message": "hello"}
    warned = json.loads(ran.stdout)["diagnostics"]
    assert [d["code"] for d in warned] == ["migration_required"]
