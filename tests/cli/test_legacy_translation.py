"""Legacy ``playbook:`` documents the original's compatibility pages promise to translate.

spec/dsl.md §1 "Legacy": the original's minimum preserved contract (its v0 ``assign`` fixture,
which carries a top-level ``version``) loads, migrates and runs; legacy provider keys a v1
provider does not have (``cache``, ``profile``) and the legacy base-URL ``endpoint`` are
dropped with a ``migration_required`` warning each, while a v1 document keeps refusing them;
so are agent keys a v1 agent does not have (vendor settings, misspellings) and the top-level
keys with no v1 place (``defaults``, ``promptCache``, ``mcpServers``, ``a2aAgents``, ``packs``).
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


PROVIDERS = """\
playbook: legacy-providers
providers:
  openai:
    kind: openai
    endpoint: https://api.openai.com/v1
    cache: true
    profile: default
agents:
  helper: { heuristic: true, instructions: summarize }
modules:
  copy: { kind: builtin.assign }
tasks:
  - { id: copy, uses: "module:copy", with: { topic: x } }
  - { id: think, uses: "agent:helper", needs: [copy], with: { prompt: x } }
"""


def test_legacy_provider_keys_v1_lacks_are_dropped_with_a_warning_each(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "old.yaml").write_text(PROVIDERS, encoding="utf-8")
    checked = cli("--output", "json", "check", "old.yaml")
    assert checked.rc == 0, checked.stderr
    warned = json.loads(checked.stdout)["diagnostics"]
    assert [d["code"] for d in warned] == ["migration_required"] * 4
    dropped = [(d["path"], d["line"], d["column"], d["severity"]) for d in warned[1:]]
    assert dropped == [
        ("spec.providers.openai.endpoint", 5, 5, "warning"),
        ("spec.providers.openai.cache", 6, 5, "warning"),
        ("spec.providers.openai.profile", 7, 5, "warning"),
    ]
    for diagnostic, key in zip(warned[1:], ("endpoint", "cache", "profile"), strict=True):
        assert f"legacy provider `openai`: `{key}` dropped" in diagnostic["message"]
    migrated = cli("--output", "json", "migrate", "old.yaml", "--write", "new.yaml")
    assert migrated.rc == 0, migrated.stderr
    assert json.loads(migrated.stdout)["diagnostics"] == warned
    document = yaml.safe_load((tmp_path / "new.yaml").read_text(encoding="utf-8"))
    assert document["spec"]["providers"]["openai"] == {"kind": "openai"}
    again = cli("--output", "json", "check", "new.yaml")
    assert again.rc == 0 and json.loads(again.stdout)["diagnostics"] == []
    ran = cli("--output", "json", "run", "old.yaml", "--db", "r.db")
    assert ran.rc == 0, ran.stderr
    assert ran.data["state"] == "succeeded"


def test_a_dropped_endpoint_is_named_beside_the_error_it_causes(cli: Cli, tmp_path: Path) -> None:
    # azure_openai has no default endpoint: the load fails, and the warning says why the
    # endpoint the legacy source does have is not there (it is not counted as a problem).
    legacy = PROVIDERS.replace("kind: openai", "kind: azure_openai\n    apiVersion: v")
    (tmp_path / "old.yaml").write_text(legacy, encoding="utf-8")
    refused = cli("--output", "json", "migrate", "old.yaml", "--write", "new.yaml")
    assert refused.rc == 2
    assert "(1 problem)" in refused.error["error"]["message"]
    first, *notes = refused.error["diagnostics"]
    assert "needs an explicit `endpoint`" in first["message"]
    assert [(n["severity"], n["path"]) for n in notes] == [
        ("warning", f"spec.providers.openai.{key}") for key in ("endpoint", "cache", "profile")
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.yaml"]


def test_a_compile_refusal_of_a_legacy_document_keeps_its_dropped_key_warnings(
    cli: Cli, tmp_path: Path
) -> None:
    # The loader accepts the translation; the compiler refuses it (an unknown module). The
    # dropped keys still follow the error, as they do a refusal by the loader, on every
    # command that compiles it; nothing is written or created.
    legacy = PROVIDERS.replace('uses: "module:copy"', 'uses: "module:nope"')
    (tmp_path / "old.yaml").write_text(legacy, encoding="utf-8")
    for args in (("check",), ("migrate", "--write", "new.yaml"), ("run", "--db", "r.db")):
        refused = cli("--output", "json", args[0], "old.yaml", *args[1:])
        assert refused.rc == 2, refused.stderr
        first, *notes = refused.error["diagnostics"]
        assert (first["code"], first["path"]) == ("missing_reference", "spec.tasks.0.uses")
        assert [(n["severity"], n["path"]) for n in notes] == [
            ("warning", f"spec.providers.openai.{key}") for key in ("endpoint", "cache", "profile")
        ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.yaml"]


def test_a_v1_document_keeps_refusing_legacy_provider_keys(cli: Cli, tmp_path: Path) -> None:
    v1 = (
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: { name: v }\nspec:\n"
        "  providers:\n    openai: { kind: openai, cache: true }\n"
        "  actions: { copy: { kind: builtin.assign } }\n"
        '  tasks: [{ id: copy, uses: "action:copy" }]\n'
    )
    (tmp_path / "v1.yaml").write_text(v1, encoding="utf-8")
    refused = cli("--output", "json", "check", "v1.yaml")
    assert refused.rc == 2
    (diagnostic,) = refused.error["diagnostics"]
    assert diagnostic["path"] == "spec.providers.openai.cache"
    assert "unknown key `cache`" in diagnostic["message"]
    # Nor is a v1 endpoint dropped: the document is kept as written, with no warning.
    with_endpoint = v1.replace("cache: true", "endpoint: https://api.openai.com/v1")
    (tmp_path / "v1.yaml").write_text(with_endpoint, encoding="utf-8")
    kept = cli("--output", "json", "migrate", "v1.yaml")
    assert kept.rc == 0, kept.stderr
    assert kept.data["document"] == with_endpoint
    assert json.loads(kept.stdout)["diagnostics"] == []


LEGACY_KINDS = """\
playbook: legacy-kinds
memory:
  longTerm: { dbPath: .agentctl/memory.db }
agents:
  reviewer: { kind: builtin.heuristic, instructions: Review it. }
tasks:
  - id: init
    uses: module:builtin.assign
    with: { framework: agentctl }
  - id: review
    uses: agent:reviewer
    needs: [init]
    with: { prompt: review }
"""


def test_legacy_builtin_modules_heuristic_agents_and_db_paths_translate(
    cli: Cli, tmp_path: Path
) -> None:
    """The legacy playbooks named built-in kinds directly (``module:builtin.assign``), spelled
    the heuristic agent ``builtin.heuristic`` and gave long-term memory a ``dbPath``: the kind
    becomes an action of that name, the agent a fake-provider one (no credential needed), and
    the path is dropped with a warning (the run database holds long-term memory)."""
    (tmp_path / "legacy.yaml").write_text(LEGACY_KINDS, encoding="utf-8")
    checked = cli("--output", "json", "check", "legacy.yaml")
    assert checked.rc == 0, checked.stderr
    diagnostics = json.loads(checked.stdout)["diagnostics"]
    warned = [d for d in diagnostics if d["code"] == "migration_required"]
    assert any(d["path"] == "spec.memory.longTerm.dbPath" for d in warned), warned
    migrated = cli("--output", "json", "migrate", "legacy.yaml", "--write", "wf.yaml")
    assert migrated.rc == 0, migrated.stderr
    doc = yaml.safe_load((tmp_path / "wf.yaml").read_text(encoding="utf-8"))
    assert doc["spec"]["actions"]["builtin.assign"] == {"kind": "builtin.assign"}
    assert doc["spec"]["agents"]["reviewer"]["provider"] == "fake"
    assert "dbPath" not in doc["spec"]["memory"]["longTerm"]
    done = cli("--output", "json", "run", "legacy.yaml", "--db", "s.db")
    assert done.rc == 0, done.stderr
    assert done.data["output"]["init"]["output"] == {"framework": "agentctl"}


def test_a_refused_migration_locates_its_diagnostics_as_check_does(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "bad.yaml").write_text(
        "playbook: mini\ntasks:\n  - id: a\n    uses: module:nosuch\n", encoding="utf-8"
    )
    checked = cli("--output", "json", "check", "bad.yaml")
    migrated = cli("--output", "json", "migrate", "bad.yaml")
    assert checked.rc == migrated.rc == 2
    located = [(d["path"], d["line"], d["column"]) for d in checked.error["diagnostics"]]
    assert located == [("spec.tasks.0.uses", 4, 11)]
    assert [(d["path"], d["line"], d["column"]) for d in migrated.error["diagnostics"]] == located


AGENT_KEYS = """\
playbook: p
agents:
  a: {provider: fake, model: x, instructions: hi, maxturns: 1, temperature: 0.2}
providers: {fake: {kind: fake}}
tasks:
  - {id: t, uses: "agent:a", with: {prompt: hi}}
"""


def test_legacy_agent_keys_v1_lacks_are_dropped_with_a_warning_each(
    cli: Cli, tmp_path: Path
) -> None:
    """A misspelt ``maxturns`` used to vanish without a word, leaving the default 8 turns."""
    (tmp_path / "old.yaml").write_text(AGENT_KEYS, encoding="utf-8")
    checked = cli("--output", "json", "check", "old.yaml")
    assert checked.rc == 0, checked.stderr
    warned = json.loads(checked.stdout)["diagnostics"]
    dropped = [(d["code"], d["path"], d["line"], d["column"]) for d in warned[1:]]
    assert dropped == [
        ("migration_required", "spec.agents.a.maxturns", 3, 51),
        ("migration_required", "spec.agents.a.temperature", 3, 64),
    ]
    assert "legacy agent `a`: `maxturns` dropped" in warned[1]["message"]
    assert warned[1]["help"].startswith("did you mean `maxTurns`?")
    migrated = cli("--output", "json", "migrate", "old.yaml")
    assert migrated.rc == 0, migrated.stderr
    assert json.loads(migrated.stdout)["diagnostics"] == warned
    agent = yaml.safe_load(migrated.data["document"])["spec"]["agents"]["a"]
    assert agent == {"provider": "fake", "model": "x", "instructions": "hi"}
    human = cli("migrate", "old.yaml")
    assert human.rc == 0
    assert "legacy agent `a`: `temperature` dropped" in human.stderr


TOP_LEVEL = """\
playbook: p
version: 1.0.0
defaults: { agentProfile: inspect }
promptCache: { enabled: true }
mcpServers:
  docs: { url: "https://mcp.example.com/mcp", bearerTokenEnv: DOCS_TOKEN }
a2aAgents: {}
modules: { put: { kind: builtin.assign } }
tasks:
  - { id: t, uses: "module:put", with: { x: 1 } }
"""


def test_legacy_top_level_keys_with_no_v1_place_are_dropped_with_a_warning_each(
    cli: Cli, tmp_path: Path
) -> None:
    """A legacy workflow's MCP servers are not carried over (the original's migration guide
    leaves them to the user: credentials are not guessed), but they are no longer lost
    silently. ``version`` only labelled the playbook, and an empty key drops nothing."""
    (tmp_path / "old.yaml").write_text(TOP_LEVEL, encoding="utf-8")
    checked = cli("--output", "json", "check", "old.yaml")
    assert checked.rc == 0, checked.stderr
    warned = json.loads(checked.stdout)["diagnostics"]
    located = [(d["code"], d["path"], d["line"], d["column"]) for d in warned[1:]]
    assert located == [
        ("migration_required", "spec.defaults", 3, 1),
        ("migration_required", "spec.promptCache", 4, 1),
        ("migration_required", "spec.mcpServers", 5, 1),
    ]
    assert "legacy `mcpServers` (`docs`) dropped" in warned[3]["message"]
    assert "spec.mcpServers" in warned[3]["help"]
    migrated = cli("--output", "json", "migrate", "old.yaml")
    assert migrated.rc == 0, migrated.stderr
    assert json.loads(migrated.stdout)["diagnostics"] == warned
    spec = yaml.safe_load(migrated.data["document"])["spec"]
    assert not {"defaults", "promptCache", "mcpServers", "a2aAgents"} & set(spec)
