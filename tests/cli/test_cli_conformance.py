"""Scripts written for the original agentctl, run unchanged: what they read must be there.

Each test is one thing such a script does (the original's acceptance scenarios, spec/cli.md
§1, §2, §5, §8, §11) where this implementation once answered differently:

- a missing provider key is exit 6 with no database even when the workflow has no
  ``networkAllowlist`` (the credential pre-flight comes before the egress one);
- a ``resume`` refused before driving (an unresolved effect, a finished run) names the trace
  this invocation minted, as every error about a run does;
- ``artifacts export DIGEST exports/x.txt`` makes the missing ``exports/``;
- the older ``effects inspect RUN [--task T]`` still lists a run's effects.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.clibackend import LedgerTarget
from tests.conftest import Cli

# No networkAllowlist: had egress been checked first, this would be exit 3 (host not allowed).
MISSING_KEY = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: missing-auth }
spec:
  providers:
    openai: { kind: openai, credential: { env: OPENAI_API_KEY } }
  agents:
    worker: { provider: openai, model: gpt-5.6, instructions: reply }
  tasks:
    - { id: work, uses: "agent:worker", with: { prompt: hello } }
"""

# A process that outlives its timeout: its effect ends uncertain and blocks resume.
UNCERTAIN = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: uncertain }
spec:
  policy: { processAllowlist: [sleep], approval: never }
  actions:
    wait: { kind: builtin.shell.exec, command: /bin/sleep, args: ["5"], timeoutSeconds: 1 }
  tasks:
    - { id: work, uses: "action:wait" }
"""

# A file write, recorded as an artifact, after a pure step.
WRITE = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata:
  name: writer
spec:
  actions: { save: { kind: builtin.write }, put: { kind: builtin.assign } }
  policy:
    writableRoots: [out]
    approval: never
  tasks:
    - { id: first, uses: "action:put", with: { v: 1 } }
    - { id: save, uses: "action:save", needs: [first], with: { path: out/report.txt, content: exported } }
"""


def _json(cli: Cli, *args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    done = cli("--output", "json", "--color", "never", *args)
    return done.rc, json.loads(done.stdout if done.stdout.strip() else done.stderr)


@pytest.mark.sqlite_only(reason="checks that no database file is created")
def test_a_missing_key_is_exit_6_before_the_network_policy_is_consulted(
    ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    (tmp_path / "wf.yaml").write_text(MISSING_KEY, encoding="utf-8")
    how = ledger_target.invocation(
        ["run", "wf.yaml", "--db", "state/r.db", "--output", "json"], tmp_path
    )
    env = {k: v for k, v in how.env.items() if k != "OPENAI_API_KEY"}
    proc = subprocess.run(
        how.argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 6, proc.stderr
    error = json.loads(proc.stderr.splitlines()[-1])["error"]
    assert error["exitCode"] == 6 and "OPENAI_API_KEY" in error["message"]
    assert not (tmp_path / "state").exists()


def test_a_refused_resume_names_its_own_trace(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(UNCERTAIN, encoding="utf-8")
    rc, failed = _json(cli, "run", "wf.yaml", "--db", "r.db")
    assert rc == 4, failed
    run_id = failed["error"]["runId"]
    rc, blocked = _json(cli, "resume", run_id, "--db", "r.db")
    assert rc == 3, blocked
    assert blocked["error"]["runId"] == run_id
    assert blocked["error"]["traceId"].startswith("trace-")
    assert blocked["error"]["traceId"] != failed["error"]["traceId"]  # a new invocation
    (tmp_path / "done.yaml").write_text(WRITE, encoding="utf-8")
    finished_id = cli("--output", "json", "run", "done.yaml", "--db", "r.db").data["runId"]
    rc, finished = _json(cli, "resume", finished_id, "--db", "r.db")
    assert rc == 4, finished
    assert finished["error"]["runId"] == finished_id
    assert finished["error"]["traceId"].startswith("trace-")


def test_export_makes_the_missing_directories_of_its_destination(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(WRITE, encoding="utf-8")
    rc, done = _json(cli, "run", "wf.yaml", "--db", "r.db")
    assert rc == 0, done
    [blob] = cli("--output", "json", "artifacts", "list", "--db", "r.db").data["blobs"]
    dest = tmp_path / "exports" / "nested" / "report.txt"
    rc, exported = _json(
        cli, "artifacts", "--db", "r.db", "export", blob["digest"], "exports/nested/report.txt"
    )
    assert rc == 0, exported
    assert dest.read_text(encoding="utf-8") == "exported"
    (tmp_path / "file").write_text("in the way", encoding="utf-8")
    rc, refused = _json(cli, "artifacts", "--db", "r.db", "export", blob["digest"], "file/x.txt")
    assert rc == 5, refused


@pytest.mark.parametrize("kind", ["device", "fifo", "directory"])
def test_overwrite_replaces_only_a_regular_file(cli: Cli, tmp_path: Path, kind: str) -> None:
    # Renaming over a device node replaces the node: `export D /dev/null --overwrite` as root
    # turned the host's /dev/null into a regular file. A device (a private null device here),
    # a FIFO or a directory is refused, exit 5, and left exactly as it was.
    (tmp_path / "wf.yaml").write_text(WRITE, encoding="utf-8")
    assert _json(cli, "run", "wf.yaml", "--db", "r.db")[0] == 0
    [blob] = cli("--output", "json", "artifacts", "list", "--db", "r.db").data["blobs"]
    target = tmp_path / "target"
    if kind == "device":
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(target, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
    before = target.lstat()
    # Without --overwrite the refusal must not advise it: --overwrite would be refused too.
    for flags in ((), ("--overwrite",)):
        rc, refused = _json(
            cli, "artifacts", "--db", "r.db", "export", blob["digest"], "target", *flags
        )
        assert rc == 5, refused
        assert "not a regular file" in refused["error"]["message"]
        assert "pass --overwrite" not in refused["error"]["message"]
    after = target.lstat()
    assert (after.st_mode, after.st_ino, after.st_rdev) == (
        before.st_mode,
        before.st_ino,
        before.st_rdev,
    )
    (tmp_path / "plain").write_text("old", encoding="utf-8")
    rc, replaced = _json(
        cli, "artifacts", "--db", "r.db", "export", blob["digest"], "plain", "--overwrite"
    )
    assert rc == 0, replaced
    assert (tmp_path / "plain").read_text(encoding="utf-8") == "exported"


def test_the_older_effects_inspect_run_task_form_lists_the_effects(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "wf.yaml").write_text(WRITE, encoding="utf-8")
    run_id = cli("--output", "json", "run", "wf.yaml", "--db", "r.db").data["runId"]
    listed = cli("--output", "json", "effects", "list", run_id, "--db", "r.db").data
    rc, by_task = _json(cli, "effects", "--db", "r.db", "inspect", run_id, "--task", "save")
    assert rc == 0, by_task
    assert by_task["kind"] == "EffectList"
    assert by_task["data"]["taskId"] == "save"
    assert [e["effectId"] for e in by_task["data"]["effects"]] == [
        e["effectId"] for e in listed["effects"] if e["taskId"] == "save"
    ]
    assert by_task["data"]["effects"][0]["status"] == "succeeded"
    rc, whole = _json(cli, "effects", "inspect", run_id[:12], "--db", "r.db")
    assert rc == 0 and whole["data"]["effects"] == listed["effects"]
    effect_id = by_task["data"]["effects"][0]["effectId"]
    rc, one = _json(cli, "effects", "inspect", effect_id, "--db", "r.db")
    assert rc == 0 and one["kind"] == "EffectInspection"
    assert one["data"]["effect"]["effectId"] == effect_id


def test_artifact_references_carry_the_logical_path_under_both_names(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "wf.yaml").write_text(WRITE, encoding="utf-8")
    assert _json(cli, "run", "wf.yaml", "--db", "r.db")[0] == 0
    [ref] = cli("--output", "json", "artifacts", "list", "--db", "r.db").data["references"]
    assert ref["logicalPath"] == ref["path"] and ref["path"].endswith(".txt")
    inspected = cli("--output", "json", "artifacts", "inspect", ref["digest"], "--db", "r.db")
    assert [r["logicalPath"] for r in inspected.data["references"]] == [ref["path"]]


@pytest.mark.parametrize("command", ["inspect", "verify", "export"])
def test_a_malformed_digest_is_bad_input_not_a_missing_artifact(
    cli: Cli, tmp_path: Path, command: str
) -> None:
    (tmp_path / "wf.yaml").write_text(WRITE, encoding="utf-8")
    assert _json(cli, "run", "wf.yaml", "--db", "r.db")[0] == 0
    extra = ["out.txt"] if command == "export" else []
    for bad in ("sha256:zz", "md5:" + "0" * 64, "sha256:" + "A" * 64):
        rc, refused = _json(cli, "artifacts", "--db", "r.db", command, bad, *extra)
        assert rc == 2, refused
        assert "not an artifact digest" in refused["error"]["message"]
    assert not (tmp_path / "out.txt").exists()
    missing = "sha256:" + "0" * 64  # well formed, stored nowhere: still not found (5)
    assert _json(cli, "artifacts", "--db", "r.db", command, missing, *extra)[0] == 5


@pytest.mark.parametrize("command", ["inspect", "verify", "export"])
@pytest.mark.parametrize("db", [(), ("--db", "state/ledger.db")])
def test_a_malformed_digest_creates_no_database(
    cli: Cli, tmp_path: Path, command: str, db: tuple[str, ...]
) -> None:
    # The digest used to be checked once the ledger was open: refused (2), but the database
    # (and its lock) was left behind by a command that changed nothing.
    extra = ["x"] if command == "export" else []
    for output in (["--output", "json"], []):
        refused = cli(*output, "artifacts", command, "sha256:abc", *extra, *db)
        assert refused.rc == 2, refused.stderr
        assert "not an artifact digest" in refused.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []
