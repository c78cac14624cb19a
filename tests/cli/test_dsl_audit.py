"""Workflows written for the original agentctl, run through the CLI as a user runs them.

Found by an audit of spec/dsl.md against ``check``/``plan``/``run``: each test is a document
the original reads one way and an earlier build of ours read another.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Cli

pytestmark = pytest.mark.sqlite_only(reason="the workflow language, not the ledger backend")

HEAD = "apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\nmetadata: { name: audit }\nspec:\n"


def _write(tmp_path: Path, text: str) -> str:
    (tmp_path / "wf.yaml").write_text(HEAD + text, encoding="utf-8")
    return "wf.yaml"


def test_plain_numbers_are_read_as_the_original_reads_them(cli: Cli, tmp_path: Path) -> None:
    # serde_yaml, the original's reader: a leading zero makes digits text (a zip code, an
    # id), `0b` is binary and the radix forms take a sign.
    wf = _write(
        tmp_path,
        """\
  actions: { put: { kind: builtin.assign } }
  tasks:
    - id: a
      uses: action:put
      with: { zip: 01234, agent: 007, zero: 0, mask: 0b101, neg: -0x1F, pos: +0o17, n: 10 }
""",
    )
    run = cli("--output", "json", "run", wf, "--db", "db.sqlite")
    assert run.rc == 0, run.stderr
    assert run.data["output"]["a"]["output"] == {
        "zip": "01234",
        "agent": "007",
        "zero": 0,
        "mask": 5,
        "neg": -31,
        "pos": 15,
        "n": 10,
    }


CONDITION_WF = """\
  runtime: { maxConcurrency: 2 }
  actions: { put: { kind: builtin.assign } }
  tasks:
    - { id: b, uses: action:put, with: { x: 1 } }
    - { id: c, uses: action:put, needs: [b] }
    - id: a
      uses: action:put
      NEEDS
      when: "${{ tasks.b.output.output.x }}"
"""


def test_a_condition_reading_a_task_it_does_not_need_is_warned(cli: Cli, tmp_path: Path) -> None:
    # Accepted, as the original accepts it, but whether `b` has finished when `a`'s condition
    # is evaluated depends on order and concurrency: here they run side by side and `a` fails.
    wf = _write(tmp_path, CONDITION_WF.replace("NEEDS", "needs: []"))
    check = cli("--output", "json", "check", wf)
    assert check.rc == 0, check.stderr
    (warning,) = json.loads(check.stdout)["diagnostics"]
    assert warning["severity"] == "warning"
    assert warning["path"] == "spec.tasks.2.when"
    assert (warning["line"], warning["column"]) == (13, 13)
    assert "without needing `b`" in warning["message"]
    assert warning["help"] == "add b to the needs of a"
    run = cli("--output", "json", "run", wf, "--db", "db.sqlite")
    assert run.rc == 4
    assert "undefined value `tasks.b.output.output.x`" in run.error["error"]["message"]


def test_a_condition_reading_a_transitive_dependency_is_not_warned(
    cli: Cli, tmp_path: Path
) -> None:
    wf = _write(tmp_path, CONDITION_WF.replace("NEEDS", "needs: [c]"))
    check = cli("--output", "json", "check", wf)
    assert check.rc == 0, check.stderr
    assert json.loads(check.stdout)["diagnostics"] == []
    run = cli("--output", "json", "run", wf, "--db", "db.sqlite")
    assert run.rc == 0, run.stderr


def test_migrate_quotes_strings_the_reader_would_take_as_numbers(cli: Cli, tmp_path: Path) -> None:
    # YAML 1.1 (the writer's rules) has no `0o` octal; our reader has: written plain, "0o17"
    # would come back as 15 and migrate refused the document ("would change its tasks").
    (tmp_path / "old.yaml").write_text(
        """\
playbook: legacy
modules: { put: { kind: builtin.assign } }
tasks:
  - { id: a, uses: "module:put", with: { o: "0o17", p: "+0o17", q: "007", n: 15 } }
""",
        encoding="utf-8",
    )
    migrated = cli("--output", "json", "migrate", "old.yaml", "--write", "new.yaml")
    assert migrated.rc == 0, migrated.stderr
    run = cli("--output", "json", "run", "new.yaml", "--db", "db.sqlite")
    assert run.rc == 0, run.stderr
    assert run.data["output"]["a"]["output"] == {"o": "0o17", "p": "+0o17", "q": "007", "n": 15}


def test_a_sub_workflow_input_nothing_takes_is_warned(cli: Cli, tmp_path: Path) -> None:
    # `wrd` for `word`: accepted (the boundary takes any key, as in the original), but the
    # default is used in silence; a key declared by `inputs` or `inputSchema`, or read, is fine.
    wf = _write(
        tmp_path,
        """\
  actions: { put: { kind: builtin.assign } }
  subworkflows:
    shout:
      version: 0.1.0
      inputs: { word: hey }
      inputSchema: { type: object, properties: { tone: { type: string } } }
      outputs: { loud: "${{ inputs.word }}${{ inputs.mark }}" }
      tasks: [ { id: echo, uses: action:put } ]
  outputs: { loud: "${{ tasks.wrap.output.loud }}" }
  tasks:
    - id: wrap
      uses: workflow:shout
      with: { wrd: hi, tone: calm, mark: "!" }
""",
    )
    check = cli("--output", "json", "check", wf)
    assert check.rc == 0, check.stderr
    (warning,) = json.loads(check.stdout)["diagnostics"]
    assert warning["severity"] == "warning"
    assert warning["path"] == "spec.tasks.0.with.wrd"
    assert (warning["line"], warning["column"]) == (17, 20)
    assert "neither declares nor reads input `wrd`" in warning["message"]
    assert warning["help"] == "did you mean `word`?"
    run = cli("--output", "json", "run", wf, "--db", "db.sqlite")
    assert run.rc == 0, run.stderr
    assert run.data["output"] == {"loud": "hey!"}


def test_a_compensation_that_is_not_an_action_is_refused_in_plain_words(
    cli: Cli, tmp_path: Path
) -> None:
    # The inverse of a mutation is an action; naming an agent is a schema error at the key,
    # told in the workflow's words, not in the validation library's ("String should match
    # pattern '^action:...'").
    wf = _write(
        tmp_path,
        """\
  policy: { writableRoots: [out] }
  actions: { save: { kind: builtin.write } }
  tasks:
    - id: make
      uses: action:save
      with: { path: out/r.txt, content: made }
      compensate: { uses: "agent:undo" }
""",
    )
    for command in ("check", "plan"):
        result = cli("--output", "json", command, wf)
        assert result.rc == 2, result.stdout
        (diagnostic,) = result.error["diagnostics"]
        assert diagnostic["code"] == "schema_violation"
        assert diagnostic["path"] == "spec.tasks.0.compensate.uses"
        assert (diagnostic["line"], diagnostic["column"]) == (11, 27)
        assert diagnostic["message"] == (
            "compensate `uses` 'agent:undo' is not valid: an inverse is an action"
        )
        assert diagnostic["help"] == "write action:NAME, naming a spec.actions entry"
    schema = cli("--output", "json", "schema").data["schema"]
    uses = schema["$defs"]["Compensate"]["properties"]["uses"]
    assert uses["pattern"] == "^action:[A-Za-z_][A-Za-z0-9_.-]*$"
