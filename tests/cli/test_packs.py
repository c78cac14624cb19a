"""Packs (issue 14 item 3), through the CLI in a fresh directory.

A workflow lists packs in ``spec.packs``; their actions and workflows run as ``PACK.NAME``.
``packs inspect|verify|lock|update|verify-lock`` read manifests and keep
``agentctl.pack.lock``; ``--locked`` demands the lock and refuses drift, ``--offline`` refuses
network sources; a bad digest fails ``check``/``run`` with exit 2 before any state exists; an
untrusted pack is refused with exit 3.
"""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, Cli

BASE = """\
apiVersion: agentctl.dev/pack/v1alpha1
name: acme.base
version: 2.1.0
agentctl: ">=0.2.0, <1.0.0"
actions:
  put: { kind: builtin.assign }
"""

TOOLS = """\
apiVersion: agentctl.dev/pack/v1alpha1
name: acme.tools
version: 1.4.0
agentctl: ">=0.3.0"
files:
  NOTICE.txt: {notice}
dependencies:
  acme.base:
    version: "^2.0"
    source: {{ path: ../base }}
actions:
  tag: {{ kind: builtin.assign, with: {{ tagged: true }} }}
workflows:
  twice:
    version: 1.0.0
    outputs: {{ value: "${{{{ tasks.second.output.output.v }}}}" }}
    tasks:
      - {{ id: first, uses: "action:acme.base.put", with: {{ v: "${{{{ inputs.word }}}}" }} }}
      - {{ id: second, uses: "action:tag", needs: [first], with: {{ v: "${{{{ tasks.first.output.output.v }}}}-${{{{ inputs.word }}}}" }} }}
"""

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{ name: uses-packs }}
spec:
  packTrust: {{ unsigned: {trust} }}
  packs:
    - name: acme.tools
      version: "{constraint}"
      source: {{ {source} }}{extra}
  outputs: {{ doubled: "${{{{ tasks.both.output.value }}}}", tagged: "${{{{ tasks.mark.output.output.tagged }}}}" }}
  tasks:
    - {{ id: both, uses: "workflow:acme.tools.twice", with: {{ word: hey }} }}
    - {{ id: mark, uses: "action:acme.tools.tag", needs: [both] }}
"""

NOTICE = b"acme tools, reviewed\n"
UNREACHABLE = f"""\
- name: acme.zzz
  version: 1.0.0
  source:
    path: packs/zzz
  integrity: sha256:{"c" * 64}
  compatibility: '*'
  dependencies: {{}}
  trust:
    status: unsigned
"""


def _digest(data: bytes) -> str:
    import hashlib

    return "sha256:" + hashlib.sha256(data).hexdigest()


def _pack_tree(root: Path) -> None:
    (root / "packs" / "base").mkdir(parents=True)
    (root / "packs" / "tools").mkdir(parents=True)
    (root / "packs" / "base" / "agentctl.pack.yaml").write_text(BASE)
    (root / "packs" / "tools" / "NOTICE.txt").write_bytes(NOTICE)
    tools = TOOLS.format(notice=_digest(NOTICE))
    (root / "packs" / "tools" / "agentctl.pack.yaml").write_text(tools)


def _workflow(
    root: Path,
    *,
    source: str = "path: packs/tools",
    constraint: str = "^1.0",
    trust: str = "allow",
    extra: str = "",
) -> Path:
    path = root / "wf.yaml"
    text = WORKFLOW.format(source=source, constraint=constraint, trust=trust, extra=extra)
    path.write_text(text)
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    _pack_tree(tmp_path)
    _workflow(tmp_path)
    return tmp_path


def _no_state(root: Path) -> None:
    assert not (root / ".agentctl").exists()


def test_pack_workflow_and_action_run_as_qualified_names(cli: Cli, project: Path) -> None:
    plan = cli("--output", "json", "plan", "wf.yaml")
    assert plan.rc == 0, plan.stderr
    uses = {t: task["uses"] for t, task in plan.data["tasks"].items()}
    assert uses["mark"] == {"kind": "action", "name": "acme.tools.tag"}
    assert uses["both--first"] == {"kind": "action", "name": "acme.base.put"}
    assert uses["both--second"] == {"kind": "action", "name": "acme.tools.tag"}
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 0, done.stderr
    assert done.data["output"] == {"doubled": "hey-hey", "tagged": True}


def test_unsigned_pack_warns_by_default(cli: Cli, project: Path) -> None:
    _workflow(project, trust="warn")
    done = cli("--output", "json", "check", "wf.yaml")
    assert done.rc == 0, done.stderr
    warned = json_diagnostics(done.stdout)
    assert {d["severity"] for d in warned} == {"warning"}
    assert any("acme.tools" in d["message"] and "unsigned" in d["message"] for d in warned)


def json_diagnostics(stdout: str) -> list[dict[str, object]]:
    import json

    found: list[dict[str, object]] = json.loads(stdout)["diagnostics"]
    return found


def test_bad_integrity_fails_check_and_run_before_any_state(cli: Cli, project: Path) -> None:
    wrong = "sha256:" + "0" * 64
    _workflow(project, extra=f"\n      integrity: {wrong}")
    for command in ("check", "run"):
        done = cli("--output", "json", command, "wf.yaml")
        assert done.rc == 2, (command, done.stdout, done.stderr)
        diag = done.error["diagnostics"][0]
        assert "integrity mismatch" in diag["message"]
        assert diag["path"] == "spec.packs.0.integrity" and diag["line"] == 10
    _no_state(project)


def test_a_changed_declared_file_fails_even_without_a_lock(cli: Cli, project: Path) -> None:
    (project / "packs" / "tools" / "NOTICE.txt").write_bytes(b"tampered\n")
    done = cli("--output", "json", "check", "wf.yaml")
    assert done.rc == 2
    assert "NOTICE.txt does not match its digest" in done.error["error"]["message"]


def test_inspect_shows_identity_exports_and_integrity(cli: Cli, project: Path) -> None:
    manifest = project / "packs" / "tools" / "agentctl.pack.yaml"
    done = cli("--output", "json", "packs", "inspect", "packs/tools")
    assert done.rc == 0, done.stderr
    data = done.data
    assert (data["name"], data["version"], data["compatible"]) == ("acme.tools", "1.4.0", True)
    assert data["integrity"] == _digest(manifest.read_bytes())
    assert data["exports"]["actions"] == ["acme.tools.tag"]
    assert data["exports"]["workflows"] == ["acme.tools.twice"]
    assert data["dependencies"]["acme.base"]["version"] == "^2.0"
    bad = cli("--output", "json", "packs", "inspect", "wf.yaml")
    assert bad.rc == 2  # a workflow is not a pack manifest: strict parse, located errors
    assert bad.error["diagnostics"][0]["line"] is not None


def test_verify_checks_the_manifest_digest(cli: Cli, project: Path) -> None:
    good = _digest((project / "packs" / "tools" / "agentctl.pack.yaml").read_bytes())
    done = cli("--output", "json", "packs", "verify", "packs/tools", "--integrity", good)
    assert done.rc == 0, done.stderr
    assert done.data["valid"] is True and done.data["files"] == ["NOTICE.txt"]
    other = _digest(b"something else")
    bad = cli("--output", "json", "packs", "verify", "packs/tools", "--integrity", other)
    assert bad.rc == 2 and "integrity mismatch" in bad.error["error"]["message"]


def test_a_malformed_lock_is_refused_with_located_diagnostics(cli: Cli, project: Path) -> None:
    assert cli("packs", "lock", "wf.yaml").rc == 0
    lock = project / "agentctl.pack.lock"
    lock.write_text(lock.read_text().replace("pack-lock/v1", "pack-lock/v9"))
    refused = cli("--output", "json", "packs", "verify-lock", "wf.yaml")
    assert refused.rc == 2, refused.stderr
    message = refused.error["error"]["message"]
    assert "is not a valid pack lock" in message and "`apiVersion`" in message
    assert "pydantic" not in message and "validation error" not in message
    assert [(d["path"], d["line"]) for d in refused.error["diagnostics"]] == [("apiVersion", 1)]


def test_verify_lock_without_a_lock_names_itself(cli: Cli, project: Path) -> None:
    refused = cli("--output", "json", "packs", "verify-lock", "wf.yaml")
    assert refused.rc == 2, refused.stderr
    message = refused.error["error"]["message"]
    assert message.startswith("packs verify-lock needs agentctl.pack.lock beside wf.yaml")
    locked = cli("--output", "json", "--locked", "check", "wf.yaml")
    assert locked.rc == 2 and locked.error["error"]["message"].startswith("--locked needs ")


def test_lock_verify_lock_and_update(cli: Cli, project: Path) -> None:
    locked = cli("--output", "json", "packs", "lock", "wf.yaml")
    assert locked.rc == 0, locked.stderr
    lock = (project / "agentctl.pack.lock").read_text()
    assert lock.startswith("apiVersion: agentctl.dev/pack-lock/v1\n")
    assert [e["name"] for e in locked.data["packs"]] == ["acme.base", "acme.tools"]
    assert locked.data["packs"][1]["dependencies"] == {"acme.base": "2.1.0"}
    assert locked.data["packs"][0]["source"] == {"path": "packs/base"}
    assert cli("--output", "json", "packs", "verify-lock", "wf.yaml").rc == 0
    assert cli("--output", "json", "--locked", "run", "wf.yaml").rc == 0
    base = project / "packs" / "base" / "agentctl.pack.yaml"
    base.write_text(BASE.replace("2.1.0", "2.2.0"))
    drift = cli("--output", "json", "packs", "verify-lock", "wf.yaml")
    assert drift.rc == 2
    assert "pack acme.base: version is 2.2.0" in drift.error["error"]["message"]
    assert any(
        d.startswith("pack acme.base: version") for d in drift.error["error"]["details"]["drift"]
    )
    assert cli("--output", "json", "check", "wf.yaml").rc == 2  # the lock binds every run
    updated = cli("--output", "json", "packs", "update", "wf.yaml", "--pack", "acme.tools")
    assert updated.rc == 0, updated.stderr
    assert [c["name"] for c in updated.data["changed"]] == ["acme.base"]
    assert updated.data["changed"][0]["to"]["version"] == "2.2.0"
    assert "version: 2.2.0" in (project / "agentctl.pack.lock").read_text()
    assert cli("--output", "json", "--locked", "check", "wf.yaml").rc == 0
    unknown = cli("--output", "json", "packs", "update", "wf.yaml", "--pack", "acme.nope")
    assert unknown.rc == 2


OTHER = """\
apiVersion: agentctl.dev/pack/v1alpha1
name: acme.other
version: 1.0.0
agentctl: ">=0.2.0"
actions:
  put: { kind: builtin.assign }
"""


def test_update_of_one_pack_takes_no_change_of_a_pack_it_does_not_depend_on(
    cli: Cli, project: Path
) -> None:
    """`--pack acme.other` reviews acme.other (and what it depends on) only: a change of
    acme.base, which only acme.tools depends on, stays unlocked drift until acme.tools is
    updated."""
    (project / "packs" / "other").mkdir()
    (project / "packs" / "other" / "agentctl.pack.yaml").write_text(OTHER)
    wf = project / "wf.yaml"
    other = '    - { name: acme.other, version: "^1.0", source: { path: packs/other } }\n'
    wf.write_text(wf.read_text().replace("  outputs:", other + "  outputs:", 1))
    assert cli("packs", "lock", "wf.yaml").rc == 0
    (project / "packs" / "base" / "agentctl.pack.yaml").write_text(BASE.replace("2.1.0", "2.2.0"))
    (project / "packs" / "other" / "agentctl.pack.yaml").write_text(OTHER.replace("1.0.0", "1.1.0"))
    one = cli("--output", "json", "packs", "update", "wf.yaml", "--pack", "acme.other")
    assert one.rc == 0, one.stderr
    assert [c["name"] for c in one.data["changed"]] == ["acme.other"]
    versions = {e["name"]: e["version"] for e in one.data["packs"]}
    assert versions == {"acme.base": "2.1.0", "acme.other": "1.1.0", "acme.tools": "1.4.0"}
    drift = cli("--output", "json", "packs", "verify-lock", "wf.yaml")
    assert drift.rc == 2 and "pack acme.base: version is 2.2.0" in drift.stderr
    both = cli("--output", "json", "packs", "update", "wf.yaml", "--pack", "acme.tools")
    assert [c["name"] for c in both.data["changed"]] == ["acme.base"]
    assert cli("--output", "json", "packs", "verify-lock", "wf.yaml").rc == 0


def test_locked_requires_the_lock_and_rejects_unreachable_entries(cli: Cli, project: Path) -> None:
    missing = cli("--output", "json", "check", "wf.yaml", "--locked")
    assert (
        missing.rc == 2 and "--locked needs agentctl.pack.lock" in missing.error["error"]["message"]
    )
    assert cli("--output", "json", "packs", "verify-lock", "wf.yaml").rc == 2
    # `packs lock` under --locked only checks: it points at itself without the flag.
    checking = cli("--output", "json", "--locked", "packs", "lock", "wf.yaml")
    assert checking.rc == 2, checking.stdout
    assert "`agentctl packs lock wf.yaml` without --locked writes it" in checking.stderr
    assert cli("packs", "lock", "wf.yaml").rc == 0
    lock = project / "agentctl.pack.lock"
    lock.write_text(lock.read_text() + UNREACHABLE)
    assert cli("--output", "json", "check", "wf.yaml").rc == 0  # only --locked is strict
    strict = cli("--output", "json", "--locked", "run", "wf.yaml")
    assert strict.rc == 2 and "no longer required" in strict.stderr
    _no_state(project)
    assert cli("--output", "json", "--locked", "packs", "update", "wf.yaml").rc == 2


def test_offline_refuses_network_sources_clearly(cli: Cli, project: Path) -> None:
    archive = (
        "archive: https://packs.example.com/acme-tools-1.4.0.tar.gz, integrity: sha256:" + "a" * 64
    )
    _workflow(project, source=archive)
    offline = cli("--output", "json", "--offline", "run", "wf.yaml")
    assert offline.rc == 2
    assert "needs the network, and --offline forbids it" in offline.error["error"]["message"]
    online = cli("--output", "json", "check", "wf.yaml")
    assert online.rc == 2
    assert online.error["diagnostics"][0]["code"] == "unsupported_capability"
    git = "git: https://example.com/acme.git, rev: " + "b" * 40
    _workflow(project, source=git)
    assert "--offline forbids" in cli("--output", "json", "check", "wf.yaml", "--offline").stderr
    _no_state(project)


def test_a_url_is_never_read_as_a_path_nor_a_path_as_a_url(cli: Cli, project: Path) -> None:
    _workflow(project, source="path: https://packs.example.com/tools.tar.gz")
    as_path = cli("--output", "json", "check", "wf.yaml")
    assert as_path.rc == 2 and "is a URL" in as_path.error["diagnostics"][0]["message"]
    _workflow(project, source="archive: packs/tools, integrity: sha256:" + "a" * 64)
    as_url = cli("--output", "json", "check", "wf.yaml")
    assert as_url.rc == 2 and "is a path" in as_url.error["diagnostics"][0]["message"]


def test_untrusted_packs_are_refused_with_exit_3(cli: Cli, project: Path) -> None:
    _workflow(project, trust="deny")
    denied = cli("--output", "json", "run", "wf.yaml")
    assert denied.rc == 3
    assert denied.error["diagnostics"][0]["code"] == "policy_denied"
    _no_state(project)
    shell = "  hello: { kind: builtin.shell.exec, command: /bin/echo, args: [hi] }\n"
    manifest = project / "packs" / "base" / "agentctl.pack.yaml"
    manifest.write_text(BASE + shell)
    _workflow(project, trust="allow")
    process = cli("--output", "json", "check", "wf.yaml")
    assert process.rc == 3
    assert "can start processes" in process.error["error"]["message"]
    text = (project / "wf.yaml").read_text()
    acknowledged = text.replace("unsigned: allow", "unsigned: allow, allowUnsignedProcess: true")
    (project / "wf.yaml").write_text(acknowledged)
    assert cli("--output", "json", "check", "wf.yaml").rc == 0


def _tar(members: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            archive.addfile(info)
    return buffer.getvalue()


def test_a_local_archive_is_a_pack_source(cli: Cli, project: Path) -> None:
    shutil.rmtree(project / "packs" / "tools")
    tools = TOOLS.format(notice=_digest(NOTICE)).replace("../base", "packs/base").encode()
    data = _tar({"agentctl.pack.yaml": tools, "NOTICE.txt": NOTICE})
    (project / "tools.tgz").write_bytes(data)
    _workflow(project, source=f"path: tools.tgz, integrity: {_digest(data)}")
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 0, done.stderr
    assert done.data["output"]["doubled"] == "hey-hey"
    locked = cli("--output", "json", "packs", "lock", "wf.yaml")
    assert locked.rc == 0, locked.stderr
    tools_entry = locked.data["packs"][1]
    assert tools_entry["source"] == {"path": "tools.tgz", "integrity": _digest(data)}
    assert cli("--output", "json", "--locked", "packs", "verify-lock", "wf.yaml").rc == 0
    (project / "agentctl.pack.lock").unlink()
    bad = _tar({"agentctl.pack.yaml": tools, "NOTICE.txt": NOTICE}, {"evil": "/etc/passwd"})
    (project / "tools.tgz").write_bytes(bad)
    _workflow(project, source="path: tools.tgz")
    refused = cli("--output", "json", "check", "wf.yaml")
    assert refused.rc == 2 and "link or special file" in refused.error["error"]["message"]


def test_resolution_errors_exit_2(cli: Cli, project: Path) -> None:
    _workflow(project, constraint="^2.0")
    too_old = cli("--output", "json", "check", "wf.yaml")
    assert too_old.rc == 2 and "does not satisfy '^2.0'" in too_old.error["error"]["message"]
    _workflow(project, source="path: ../elsewhere")
    (project.parent / "elsewhere").mkdir(exist_ok=True)
    escape = cli("--output", "json", "check", "wf.yaml")
    assert escape.rc == 2 and "outside the workflow" in escape.error["error"]["message"]
    _workflow(project)
    base = project / "packs" / "base" / "agentctl.pack.yaml"
    cycle = "dependencies:\n  acme.tools:\n    version: '*'\n    source: { path: ../tools }\n"
    base.write_text(BASE + cycle)
    looped = cli("--output", "json", "check", "wf.yaml")
    assert looped.rc == 2 and "pack dependency cycle" in looped.error["error"]["message"]
    assert [d["code"] for d in looped.error["diagnostics"]] == ["dependency_cycle"]


def _legacy_reference(project: Path, path: str, integrity: str) -> None:
    """The project's pack reference rewritten in the legacy `{path, integrity}` form."""
    text = (project / "wf.yaml").read_text()
    legacy = text.replace('version: "^1.0"', "version: 1.4.0").replace(
        "source: { path: packs/tools }", f"path: {path}\n      integrity: {integrity}"
    )
    (project / "wf.yaml").write_text(legacy)


def test_legacy_path_reference_warns_migration(cli: Cli, project: Path) -> None:
    digest = _digest((project / "packs" / "tools" / "agentctl.pack.yaml").read_bytes())
    _legacy_reference(project, "packs/tools/agentctl.pack.yaml", digest)
    done = cli("--output", "json", "check", "wf.yaml")
    assert done.rc == 0, done.stderr
    codes = {d["code"] for d in json_diagnostics(done.stdout)}
    assert "migration_required" in codes


def test_a_legacy_path_reference_to_a_url_is_a_diagnostic(cli: Cli, project: Path) -> None:
    # Refused while the document is validated (exit 2, at the key), never escaping as an
    # internal error when the packs are read.
    _legacy_reference(project, "https://example.com/tools.pack.yaml", f"sha256:{'a' * 64}")
    done = cli("--output", "json", "check", "wf.yaml")
    assert done.rc == 2, done.stderr
    (diag,) = done.error["diagnostics"]
    assert diag["code"] == "schema_violation" and diag["path"] == "spec.packs.0.path"
    assert "is a URL" in diag["message"]


def test_the_bundled_pack_example_runs_locked(cli: Cli, tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES, tmp_path / "ex")
    done = cli("--output", "json", "--locked", "run", "ex/reusable-pack.yaml")
    assert done.rc == 0, done.stderr
    assert done.data["output"] == {"text": "hello, ada", "signedBy": "example.greeting"}
    assert cli("--output", "json", "packs", "verify-lock", "ex/reusable-pack.yaml").rc == 0


def test_migrate_keeps_a_workflow_with_packs_compiling(cli: Cli, project: Path) -> None:
    path = project / "wf.yaml"
    path.write_text(path.read_text().replace("agentctl.dev/v1\n", "agentctl.dev/v1alpha1\n"))
    done = cli("--output", "json", "migrate", "wf.yaml", "--write", "v1.yaml")
    assert done.rc == 0, done.stderr
    assert cli("--output", "json", "run", "v1.yaml").rc == 0


AI_PACK = """\
apiVersion: agentctl.dev/pack/v1alpha1
name: acme.ai
version: 0.1.0
agentctl: "*"
tools:
  peek:
    kind: builtin.workspace.read
    description: read a file
    capability: filesystem.read
    risk: low
    effectClass: observe
    idempotency: idempotent
    retrySafe: true
    timeoutSeconds: 5
    outputSchema: { type: object }
    inputSchema: { type: object, properties: { path: { type: string } }, required: [path], additionalProperties: false }
agents:
  scout:
    provider: sim
    model: m
    instructions: Gather.
    tools: [peek]
    maxTurns: 2
    providerOptions: { toolInput: { path: notes.txt }, finalText: done }
"""

AI_WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: pack-agent }
spec:
  packTrust: { unsigned: allow }
  policy: { approval: never, toolsAllow: [acme.ai.peek] }
  providers: { sim: { kind: fake } }
  packs: [ { name: acme.ai, version: "0.1", source: { path: ai } } ]
  tasks: [ { id: scan, uses: "agent:acme.ai.scout", with: { prompt: look } } ]
"""


def test_a_pack_agent_uses_its_own_tools_and_the_workflows_provider(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "ai").mkdir()
    (tmp_path / "ai" / "agentctl.pack.yaml").write_text(AI_PACK)
    (tmp_path / "wf.yaml").write_text(AI_WORKFLOW)
    (tmp_path / "notes.txt").write_text("notes")
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 0, done.stderr
    calls = cli("--output", "json", "inspect", done.data["runId"]).data["toolCalls"]
    assert [c["tool"] for c in calls] == ["acme.ai.peek"]
    (tmp_path / "ai" / "agentctl.pack.yaml").write_text(
        AI_PACK.replace("tools: [peek]", "tools: [poke]")
    )
    missing = cli("--output", "json", "check", "wf.yaml")
    assert missing.rc == 2
    assert missing.error["diagnostics"][0]["code"] == "missing_reference"
    assert "'poke'" in missing.error["error"]["message"]


def test_a_pack_name_may_not_shadow_a_workflow_definition(cli: Cli, project: Path) -> None:
    text = (project / "wf.yaml").read_text()
    shadow = text.replace(
        "  tasks:\n", "  actions: { acme.tools.tag: { kind: builtin.assign } }\n  tasks:\n"
    )
    (project / "wf.yaml").write_text(shadow)
    done = cli("--output", "json", "check", "wf.yaml")
    assert (
        done.rc == 2 and "defined by the workflow and by a pack" in done.error["error"]["message"]
    )


def test_repair_reuses_pack_tasks_of_the_source_run(cli: Cli, project: Path) -> None:
    text = (project / "wf.yaml").read_text()
    gate = '    - { id: gate, uses: "action:check", needs: [mark], with: { that: false, message: no } }\n'
    failing = text.replace(
        "  tasks:\n", "  actions: { check: { kind: builtin.assert } }\n  tasks:\n"
    )
    (project / "wf.yaml").write_text(failing + gate)
    failed = cli("--output", "json", "run", "wf.yaml")
    assert failed.rc == 4, failed.stderr
    run_id = failed.error["error"]["runId"]
    (project / "fixed.yaml").write_text(failing + gate.replace("that: false", "that: true"))
    repaired = cli("--output", "json", "repair", "fixed.yaml", run_id, "--from", "gate")
    assert repaired.rc == 0, repaired.stderr
    assert "both--second" in repaired.data["reusedTasks"]
    assert repaired.data["executedTasks"] == ["gate"]


def test_human_inspect_and_update_show_dependencies_and_changes(cli: Cli, project: Path) -> None:
    """The human views say what docs/packs.md promises: `inspect` the dependencies (with
    constraint and source) and declared files, `update` what changed in the lock."""
    shown = cli("packs", "inspect", "packs/tools")
    assert shown.rc == 0, shown.stderr
    assert "depends on acme.base ^2.0 (path ../base)" in shown.stdout
    assert "files: NOTICE.txt" in shown.stdout
    assert cli("packs", "lock", "wf.yaml").rc == 0
    same = cli("packs", "update", "wf.yaml")
    assert same.rc == 0 and same.stdout.splitlines()[1:] == ["  no change"], same.stdout
    base = project / "packs" / "base" / "agentctl.pack.yaml"
    base.write_text(BASE.replace("2.1.0", "2.2.0"))
    updated = cli("packs", "update", "wf.yaml")
    assert updated.rc == 0, updated.stderr
    assert updated.stdout.splitlines()[1:] == ["  changed  acme.base 2.1.0 -> 2.2.0"]
