"""A pack's declared files read by its agents and sub-workflow tasks, through the CLI.

A pack agent's ``instructionsFile``/``varsFiles`` and its exported sub-workflow tasks'
``varsFiles`` name files relative to the pack manifest's directory, declared with their
digest in the manifest's ``files``; the bytes are the verified ones, named ``pack://P/path``
(so two packs, or a pack and the workflow, reading the same relative path each get their own),
and ``explain`` shows that name. An undeclared file or a changed one is refused (exit 2)
before any state exists.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_packs import _digest, _tar
from tests.conftest import Cli, CliResult

pytestmark = pytest.mark.sqlite_only(reason="pack source capture, not the ledger backend")

PACK = """\
apiVersion: agentctl.dev/pack/v1alpha1
name: {name}
version: 1.0.0
agentctl: "*"
files:
{files}
agents:
  speaker:
    provider: sim
    model: m
    maxTurns: 1
    instructionsFile: prompt.md
    varsFiles: [vars.yaml]
    providerOptions: {{ finalText: done }}
workflows:
  flow:
    version: 1.0.0
    tasks:
      - {{ id: say, uses: "agent:speaker", varsFiles: [task/who.yaml], with: {{ prompt: go }} }}
"""

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: pack-files }
spec:
  packTrust: { unsigned: allow }
  providers: { sim: { kind: fake } }
  packs:
    - { name: acme.one, version: "^1.0", source: { path: packs/one } }
    - { name: acme.two, version: "^1.0", source: { path: packs/two } }
  agents:
    own: { provider: sim, model: m, maxTurns: 1, instructionsFile: prompt.md, varsFiles: [vars.yaml], providerOptions: { finalText: done } }
  tasks:
    - { id: a, uses: "workflow:acme.one.flow" }
    - { id: b, uses: "agent:acme.two.speaker", needs: [a], with: { prompt: go } }
    - { id: c, uses: "agent:own", needs: [b], with: { prompt: go } }
"""


def _pack(root: Path, name: str, tone: str, who: str) -> None:
    """Pack ``acme.<name>`` in ``packs/<name>``: its prompt, its agent's and its task's vars."""
    files = {
        "prompt.md": f"[{name}] Tone ${{{{ vars.tone }}}} for ${{{{ vars.who }}}}.".encode(),
        "vars.yaml": f"tone: {tone}\nwho: nobody\n".encode(),
        "task/who.yaml": f"who: {who}\n".encode(),
    }
    where = root / "packs" / name
    for rel, data in files.items():
        (where / rel).parent.mkdir(parents=True, exist_ok=True)
        (where / rel).write_bytes(data)
    declared = "\n".join(f"  {rel}: {_digest(data)}" for rel, data in files.items())
    manifest = PACK.format(name=f"acme.{name}", files=declared)
    (where / "agentctl.pack.yaml").write_text(manifest, encoding="utf-8")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    _pack(tmp_path, "one", "calm", "ops")
    _pack(tmp_path, "two", "brisk", "devs")
    # The workflow's own files of the same names: a pack never reads these.
    (tmp_path / "prompt.md").write_text("[own] Tone ${{ vars.tone }} for ${{ vars.who }}.")
    (tmp_path / "vars.yaml").write_text("tone: plain\nwho: all\n")
    (tmp_path / "wf.yaml").write_text(WORKFLOW, encoding="utf-8")
    return tmp_path


def _system_messages(cli: Cli, run: CliResult) -> dict[str, str]:
    """The system message of every model call the run recorded, by task id."""
    effects = cli("--output", "json", "inspect", run.data["runId"]).data["effects"]
    return {
        e["taskId"]: e["request"]["input"]["messages"][0]["content"]
        for e in effects
        if e["effectClass"] == "model"
    }


def _refused(cli: Cli, project: Path) -> tuple[str, dict[str, str]]:
    """The message and the first diagnostic of a refused run (exit 2, no state made)."""
    got = cli("--output", "json", "run", "wf.yaml")
    assert got.rc == 2, (got.stdout, got.stderr)
    assert not (project / ".agentctl").exists()
    return got.error["error"]["message"], got.error["diagnostics"][0]


def test_pack_agents_and_tasks_read_their_own_declared_files(cli: Cli, project: Path) -> None:
    run = cli("--output", "json", "run", "wf.yaml")
    assert run.rc == 0, run.stderr
    assert sorted(_system_messages(cli, run).values()) == [
        "[one] Tone calm for ops.",
        "[own] Tone plain for all.",
        "[two] Tone brisk for nobody.",
    ]


def test_explain_names_each_pack_file_by_pack_and_path(cli: Cli, project: Path) -> None:
    done = cli("--output", "json", "explain", "wf.yaml")
    assert done.rc == 0, done.stderr
    sources = {i["agent"]: i["source"] for i in done.data["instructions"]}
    assert sources == {
        "own": "prompt.md",
        "acme.one.speaker": "pack://acme.one/prompt.md",
        "acme.two.speaker": "pack://acme.two/prompt.md",
    }
    won = {t["taskId"]: t["variables"] for t in done.data["tasks"]}
    assert won["a--say"]["who"]["source"] == "pack://acme.one/task/who.yaml"
    assert won["a--say"]["tone"]["source"] == "pack://acme.one/vars.yaml"
    assert won["b"]["tone"] == {"layer": "agentVarsFiles", "source": "pack://acme.two/vars.yaml"}
    assert won["c"]["tone"] == {"layer": "agentVarsFiles", "source": "vars.yaml"}


def test_an_undeclared_pack_file_is_refused(cli: Cli, project: Path) -> None:
    manifest = project / "packs" / "two" / "agentctl.pack.yaml"
    manifest.write_text(manifest.read_text().replace("[vars.yaml]", "[extra.yaml]"))
    (project / "packs" / "two" / "extra.yaml").write_text("tone: loud\n")
    message, diag = _refused(cli, project)
    assert message == (
        "pack acme.two: agents.speaker reads 'extra.yaml', which the manifest's `files` "
        "does not declare"
    )
    assert diag["code"] == "schema_violation"
    assert diag["file"].endswith("agentctl.pack.yaml")


def test_a_pack_file_that_differs_from_its_digest_is_refused(cli: Cli, project: Path) -> None:
    assert cli("--output", "json", "check", "wf.yaml").rc == 0
    (project / "packs" / "one" / "task" / "who.yaml").write_text("who: mallory\n")
    message, _diag = _refused(cli, project)
    assert "pack acme.one: declared file task/who.yaml does not match its digest" in message


def test_a_pack_file_has_the_limits_of_a_workflows_own(cli: Cli, tmp_path: Path) -> None:
    """An archive member is verified by digest yet still bounded at 1 MiB, as a var file is."""
    big = ("tone: " + "x" * (1024 * 1024) + "\n").encode()
    manifest = PACK.format(
        name="acme.big",
        files=f"  vars.yaml: {_digest(big)}\n  prompt.md: {_digest(b'hi')}\n"
        f"  task/who.yaml: {_digest(b'who: a')}",
    )
    members = {"agentctl.pack.yaml": manifest.encode(), "vars.yaml": big}
    members.update({"prompt.md": b"hi", "task/who.yaml": b"who: a"})
    (tmp_path / "big.tgz").write_bytes(_tar(members))
    workflow = WORKFLOW.split("  packs:")[0] + (
        '  packs: [ { name: acme.big, version: "*", source: { path: big.tgz } } ]\n'
        '  tasks: [ { id: t, uses: "agent:acme.big.speaker", with: { prompt: go } } ]\n'
    )
    (tmp_path / "wf.yaml").write_text(workflow, encoding="utf-8")
    message, diag = _refused(cli, tmp_path)
    assert message == "var file pack://acme.big/vars.yaml is larger than 1048576 bytes"
    assert diag["path"] == "spec.agents.acme.big.speaker.varsFiles.0"
