"""What scripts written for the original agentctl read from our output, run unchanged.

Each test is one shape its public acceptance scenarios (``xtask/src/acceptance.rs``) or its
CLI rely on, where we once printed something else:

- an effect record carries the original's ``request`` object (``/data/effects/0/request/id``,
  scenarios 28 and 41), next to our flat keys (spec/cli.md §1);
- a blob record carries ``referenceCount`` (scenario 6: ``/data/blob/referenceCount`` is 1);
- the human ``inspect`` of a repaired run has the tokens ``source=RUN``, ``reused=T,…`` and
  ``executed=T,…`` (scenario 26 greps them);
- a missing command (``agentctl``, a bare group) is a usage error, exit 2 (clap's), not a help
  page with exit 0; ``-h``/``--help`` still print help with exit 0;
- a budget refusal of an action names the dimension and its limit, as an agent call's does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Cli, CliResult

# A file write (recorded as an artifact) after a pure step.
WRITE = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: writer }
spec:
  actions: { save: { kind: builtin.write }, put: { kind: builtin.assign } }
  policy: { writableRoots: [out], approval: never }
  tasks:
    - { id: first, uses: "action:put", with: { v: 1 } }
    - { id: save, uses: "action:save", needs: [first], with: { path: out/report.txt, content: hi } }
"""

# `second` fails until ok.flag exists; `third` needs it.
REPAIRABLE = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: repairable }
spec:
  policy: { approval: never, processAllowlist: [sh] }
  actions:
    put: { kind: builtin.assign }
    check: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "test -f ok.flag"] }
  tasks:
    - { id: first, uses: "action:put", with: { v: 1 } }
    - { id: second, uses: "action:check", needs: [first] }
    - { id: third, uses: "action:put", needs: [second], with: { v: 3 } }
"""

# The budget cannot hold the process's combined output limit: refused before dispatch.
OVER_BUDGET = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: capped }
spec:
  runtime: { budgets: { maxProcessOutputBytes: 100 } }
  policy: { approval: never, processAllowlist: [sh] }
  actions: { step: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo ran"] } }
  tasks: [{ id: step, uses: "action:step" }]
"""


def _ok(done: CliResult) -> dict:  # type: ignore[type-arg]
    assert done.rc == 0, (done.stdout, done.stderr)
    return done.data  # type: ignore[no-any-return]


def _run(cli: Cli, tmp_path: Path, text: str, rc: int = 0) -> str:
    (tmp_path / "wf.yaml").write_text(text, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--db", "s/r.db")
    assert done.rc == rc, (done.stdout, done.stderr)
    return str(done.data["runId"] if rc == 0 else done.error["error"]["runId"])


def test_an_effect_record_carries_the_originals_request_object(cli: Cli, tmp_path: Path) -> None:
    run_id = _run(cli, tmp_path, WRITE)
    db = ("--db", "s/r.db")
    [inspected] = _ok(cli("--output", "json", "inspect", run_id, *db))["effects"]
    [listed] = _ok(cli("--output", "json", "effects", "list", run_id, *db))["effects"]
    effect_id = inspected["effectId"]
    one = _ok(cli("--output", "json", "effects", "inspect", effect_id, *db))["effect"]
    for record in (inspected, listed, one):
        request = record["request"]
        # The original's names, filled from the row; our flat keys stay (spec/cli.md §1).
        assert request["id"] == record["effectId"] == effect_id
        assert request["runId"] == run_id and request["taskId"] == record["taskId"] == "save"
        assert request["effectClass"] == record["effectClass"] == "workspace_mutate"
        assert request["operation"] == record["operation"]
        assert (request["attempt"], request["ordinal"]) == (record["attempt"], record["ordinal"])
        assert request["risk"] == record["risk"]
        assert request["idempotency"] == record["idempotency"]
        assert request["idempotencyKey"] == effect_id
        assert request["inputDigest"] == record["inputDigest"]
        assert request["traceId"] == record["traceId"]
        assert request["formatVersion"] == 1
        # The request payload is the original's ``input``.
        assert request["input"]["path"] == "out/report.txt"


def test_a_blob_record_counts_its_references(cli: Cli, tmp_path: Path) -> None:
    run_id = _run(cli, tmp_path, WRITE)
    db = ("--db", "s/r.db")
    listed = _ok(cli("--output", "json", "artifacts", "list", "--run", run_id, *db))
    [blob] = listed["blobs"]
    assert blob["referenceCount"] == 1
    inspected = _ok(cli("--output", "json", "artifacts", "inspect", blob["digest"], *db))
    assert inspected["blob"]["referenceCount"] == 1 == len(inspected["references"])
    # A replay references the same blob again: the count is read, not assumed.
    _ok(cli("--output", "json", "replay", run_id, *db))
    again = _ok(cli("--output", "json", "artifacts", "inspect", blob["digest"], *db))
    assert again["blob"]["referenceCount"] == 2 == len(again["references"])
    [every] = _ok(cli("--output", "json", "artifacts", "list", *db))["blobs"]
    assert every["referenceCount"] == 2


def test_human_inspect_of_a_repair_has_the_originals_lineage_tokens(
    cli: Cli, tmp_path: Path
) -> None:
    source = _run(cli, tmp_path, REPAIRABLE, rc=4)
    (tmp_path / "ok.flag").write_text("", encoding="utf-8")
    db = ("--db", "s/r.db")
    repair = ("repair", "wf.yaml", source, "--from", "second", *db)
    repaired = _ok(cli("--output", "json", *repair))["runId"]
    view = cli("inspect", repaired, *db, "--output", "human", "--color", "never")
    assert view.rc == 0, view.stderr
    tokens = view.stdout.split()
    assert f"source={source}" in tokens
    assert "reused=first" in tokens
    assert "executed=second,third" in tokens
    assert f"source {source}" in view.stdout  # what was there stays
    # A first run has no lineage tokens.
    plain = cli("inspect", source, *db, "--color", "never")
    assert plain.rc == 0 and "reused=" not in plain.stdout


@pytest.mark.parametrize("words", [(), ("effects",), ("approvals",), ("db", "encryption")])
def test_a_missing_command_is_a_usage_error(cli: Cli, words: tuple[str, ...]) -> None:
    path = " ".join(("agentctl", *words))
    human = cli(*words)
    assert human.rc == 2 and human.stdout == ""
    assert f"Usage: {path} [OPTIONS] COMMAND" in human.stderr  # the usage page, on stderr
    assert f"error: missing command: '{path}'" in human.stderr
    as_json = cli("--output", "json", *words)
    assert as_json.rc == 2 and as_json.stdout == ""
    error = json.loads(as_json.stderr)
    assert error["ok"] is False and error["error"]["exitCode"] == 2
    assert f"'{path} --help'" in error["error"]["message"]
    # Asking for help is no error: the same page on stdout, exit 0.
    for flag in ("-h", "--help"):
        asked = cli(*words, flag)
        assert asked.rc == 0 and asked.stdout.startswith(f"Usage: {path} "), asked.stderr


@pytest.mark.parametrize("words", [("effects",), ("approvals",), ("runs",), ("db", "encryption")])
def test_a_group_given_only_its_db_is_a_missing_command(
    cli: Cli, tmp_path: Path, words: tuple[str, ...]
) -> None:
    # `agentctl effects --db X` is the documented group form with its command forgotten: the
    # same usage error as `agentctl effects`, not "No such option: --db"; nothing is created.
    path = " ".join(("agentctl", *words))
    for form in (("--db", "s/r.db"), ("--db=s/r.db",)):
        human = cli(*words, *form)
        assert human.rc == 2 and human.stdout == ""
        assert f"Usage: {path} [OPTIONS] COMMAND" in human.stderr
        assert f"error: missing command: '{path}'" in human.stderr
        assert "No such option" not in human.stderr
        as_json = cli("--output", "json", *words, *form)
        assert as_json.rc == 2 and as_json.stdout == ""
        assert json.loads(as_json.stderr)["error"]["message"].startswith("missing command")
    assert not (tmp_path / "s").exists()
    # An option the group does not know is still named as such.
    unknown = cli(*words, "--bogus")
    assert unknown.rc == 2 and "No such option: --bogus" in unknown.stderr


def test_a_budget_refusal_of_an_action_names_the_dimension_and_limit(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "wf.yaml").write_text(OVER_BUDGET, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--db", "s/r.db")
    assert done.rc == 4, (done.stdout, done.stderr)
    message = done.error["error"]["message"]
    # What it said before stays ("budget exceeded"); the limit that refused it follows.
    assert "budget exceeded: processOutputBytes (limit 100, would reach " in message
    assert "before builtin.shell.exec; nothing was dispatched" in message
    shown = _ok(cli("--output", "json", "inspect", done.error["error"]["runId"], "--db", "s/r.db"))
    [task] = shown["tasks"]
    assert "budget exceeded: processOutputBytes (limit 100" in task["error"]
    assert shown["budget"]["exceeded"]["dimension"] == "processOutputBytes"
    assert shown["effects"] == []
