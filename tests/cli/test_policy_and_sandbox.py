"""Policy, approvals, secrets and isolation, checked the way an operator meets them."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from tests.conftest import StartCli

HEAD = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: guarded }
spec:
"""


def _write_wf(path: str, roots: str = "[out]") -> str:
    return (
        HEAD
        + f"""\
  policy: {{ approval: never, writableRoots: {roots} }}
  actions: {{ save: {{ kind: builtin.write }} }}
  tasks: [ {{ id: save, uses: "action:save", with: {{ path: {path}, content: escaped }} }} ]
"""
    )


ESCAPES = {
    "parent": '"../x.txt"',
    "absolute": '"/tmp/agentctl-escape-abs.txt"',
    "nested-parent": '"out/../../x.txt"',
    "deep-parent": '"out/sub/../../../x.txt"',
    "dot-parent": '"./../x.txt"',
    "symlinked-dir": '"out/link/x.txt"',
    "symlinked-parent": '"linked/x.txt"',
    "symlink-file": '"out/file-link"',
    "nul-byte": '"out/a\\0b.txt"',
    "empty": '""',
    "outside-writable-roots": '"other/x.txt"',
}


def _files_outside_state(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob("*") if not {"state", ".agentctl"} & set(p.parts))


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_write_escape_attempts_are_denied(name: str, cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    outside = tmp_path / "outside"
    (ws / "out").mkdir(parents=True)
    (ws / "other").mkdir()
    outside.mkdir()
    os.symlink(outside, ws / "out" / "link")
    os.symlink(outside, ws / "linked")
    os.symlink(outside / "target.txt", ws / "out" / "file-link")
    roots = "[out, linked]" if name == "symlinked-parent" else "[out]"
    wf = write_workflow(_write_wf(ESCAPES[name], roots))
    # Agentctl's own state: the ledger's directory, and (PostgreSQL) the host-local .agentctl/.
    before = _files_outside_state(tmp_path)
    state_db = tmp_path / "state" / "r.db"
    done = cli("--output", "json", "run", str(wf), "--db", str(state_db), "--workspace", str(ws))
    assert done.rc == 4, (name, done.rc, done.stderr)
    assert "Traceback" not in done.stderr
    after = _files_outside_state(tmp_path)
    assert after == before, f"{name}: something was written"
    assert not Path("/tmp/agentctl-escape-abs.txt").exists()


def test_no_writable_roots_denies_every_write(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    wf = write_workflow(_write_wf('"out/a.txt"', "[]"))
    done = cli("--output", "json", "run", str(wf), "--db", str(tmp_path / "r.db"))
    assert done.rc == 4 and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("policy", "expected_rc"),
    [
        ("{ writableRoots: [out], toolsDeny: [filesystem.write], approval: never }", 4),
        ("{ writableRoots: [out], toolsAllow: [process.exec], approval: never }", 4),
        ("{ writableRoots: [out], nonInteractive: fail }", 4),
        ("{ writableRoots: [out], nonInteractive: deny_approval }", 4),
        ("{ writableRoots: [out] }", 3),
        ("{ writableRoots: [out], approval: never }", 0),
    ],
)
def test_policy_decisions(
    policy: str, expected_rc: int, cli, write_workflow, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    wf = write_workflow(
        HEAD
        + f"""\
  policy: {policy}
  actions: {{ save: {{ kind: builtin.write }} }}
  tasks: [ {{ id: save, uses: "action:save", with: {{ path: out/a.txt, content: hello }} }} ]
"""
    )
    done = cli("--output", "json", "run", str(wf), "--db", str(tmp_path / "r.db"))
    assert done.rc == expected_rc, done.stderr
    assert (tmp_path / "out" / "a.txt").exists() == (expected_rc == 0)


@pytest.mark.parametrize(
    ("policy", "refused", "with_"),
    [
        ("{ approval: never, processAllowlist: [echo], toolsDeny: [process.exec] }", "say", ""),
        (
            "{ approval: never, writableRoots: [out] }",
            "escape",
            ", with: { path: ../e.txt, content: x }",
        ),
    ],
)
def test_a_task_refused_before_dispatch_is_audited_after_the_task_it_needs(  # type: ignore[no-untyped-def]
    policy: str, refused: str, with_: str, cli, write_workflow, tmp_path: Path
) -> None:
    # The pure task's completion and the refusal commit in one batch: its events come first.
    wf = write_workflow(
        HEAD
        + f"""\
  policy: {policy}
  actions:
    put: {{ kind: builtin.assign }}
    say: {{ kind: builtin.shell.exec, command: /bin/echo, args: [hi] }}
    escape: {{ kind: builtin.write }}
  tasks:
    - {{ id: a, uses: "action:put", with: {{ x: 1 }} }}
    - {{ id: {refused}, uses: "action:{refused}", needs: [a]{with_} }}
"""
    )
    done = cli("--output", "json", "run", str(wf), "--db", str(tmp_path / "r.db"))
    assert done.rc == 4, done.stderr
    run_id = done.error["error"]["runId"]
    shown = cli("--output", "json", "inspect", run_id, "--db", str(tmp_path / "r.db"))
    events = [(e["eventType"], e["taskId"]) for e in shown.data["audit"]]
    tasks = [e for e in events if e[0].startswith("task.")]
    assert tasks == [
        ("task.ready", "a"),
        ("task.running", "a"),
        ("task.succeeded", "a"),
        ("task.ready", refused),
        ("task.running", refused),
        ("task.failed", refused),
    ]
    assert not (tmp_path / "e.txt").exists()


def test_unchanged_content_is_no_effect_and_needs_no_approval(
    cli, write_workflow, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "a.txt").write_text("hello")
    wf = write_workflow(
        HEAD
        + """\
  policy: { writableRoots: [out] }
  actions: { save: { kind: builtin.write } }
  tasks: [ { id: save, uses: "action:save", with: { path: out/a.txt, content: hello } } ]
"""
    )
    done = cli("--output", "json", "run", str(wf), "--db", str(tmp_path / "r.db"))
    assert done.rc == 0, done.stderr
    assert done.data["output"]["save"]["status"] == "unchanged"
    data = cli(
        "--output", "json", "inspect", done.data["runId"], "--db", str(tmp_path / "r.db")
    ).data
    assert data["effects"] == [] and data["approvals"] == []


APPROVAL = (
    HEAD
    + """\
  policy: { writableRoots: [out], processAllowlist: [sh] }
  actions:
    save: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo once >> out/a.txt"] }
  tasks: [ { id: save, uses: "action:save" } ]
"""
)


def _approval_id(cli, db: Path, run_id: str) -> str:  # type: ignore[no-untyped-def]
    listed = cli("--output", "json", "approvals", "list", run_id, "--db", str(db))
    assert listed.rc == 0, listed.stderr
    [approval] = listed.data["approvals"]
    assert approval["status"] == "pending" and approval["taskId"] == "save"
    return str(approval["approvalId"])


def test_approve_then_resume_runs_the_effect_once(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "out").mkdir()
    wf = write_workflow(APPROVAL)
    db = tmp_path / "r.db"
    paused = cli("--output", "json", "run", str(wf), "--db", str(db))
    assert paused.rc == 3 and paused.data["state"] == "paused"
    assert not (tmp_path / "out" / "a.txt").exists()
    run_id = paused.data["runId"]
    approval = _approval_id(cli, db, run_id)
    why = ("--reason", "looks fine", "--actor", "ops", "--db", str(db))
    ok = cli("--output", "json", "approvals", "approve", approval, *why)
    assert ok.rc == 0 and ok.data["status"] == "approved"
    assert not (tmp_path / "out" / "a.txt").exists(), "approval alone must not execute"
    done = cli("--output", "json", "resume", run_id, "--db", str(db))
    assert done.rc == 0, done.stderr
    assert (tmp_path / "out" / "a.txt").read_text() == "once\n"
    assert cli("resume", run_id, "--db", str(db)).rc == 4  # terminal now
    assert (tmp_path / "out" / "a.txt").read_text() == "once\n"
    twice = cli(
        "--output", "json", "approvals", "approve", approval, "--reason", "again", "--db", str(db)
    )
    assert twice.rc == 5


def test_reject_then_resume_fails_the_run(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "out").mkdir()
    wf = write_workflow(APPROVAL)
    db = tmp_path / "r.db"
    paused = cli("--output", "json", "run", str(wf), "--db", str(db))
    run_id = paused.data["runId"]
    approval = _approval_id(cli, db, run_id)
    assert cli("approvals", "reject", approval, "--reason", "no", "--db", str(db)).rc == 0
    done = cli("--output", "json", "resume", run_id, "--db", str(db))
    # spec/cli.md §5: the rejection fails the task and the run; the resume prints its outcome.
    assert done.rc == 4
    assert done.data["runId"] == run_id and done.data["state"] == "failed"
    task = cli("--output", "json", "inspect", run_id, "--db", str(db)).data["tasks"][0]
    assert task["state"] == "failed" and task["error"] == "approval rejected"
    assert not (tmp_path / "out" / "a.txt").exists()


def test_env_secret_never_reaches_disk_or_output(
    cli, ledger_target, write_workflow, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    # Letters and digits only: ``re.escape`` keeps it as it is, so a pattern made from it
    # (``core.redact``) would show it verbatim in a stored pattern.
    secret = "s3cr3t" + os.urandom(8).hex()
    wf = write_workflow(
        HEAD
        + """\
  policy: { approval: never, processAllowlist: [sh], environmentAllowlist: [DEPLOY_TOKEN], writableRoots: [out] }
  actions:
    leak:
      kind: builtin.shell.exec
      command: /bin/sh
      args: ["-c", "echo token=$TOKEN; echo $TOKEN >&2; exit 0"]
      env: { TOKEN: { env: DEPLOY_TOKEN } }
    save: { kind: builtin.write }
  tasks:
    - { id: leak, uses: "action:leak" }
    - { id: save, uses: "action:save", needs: [leak], with: { path: out/log.txt, content: "${{ tasks.leak.output.stdout }}" } }
"""
    )
    db = tmp_path / "state" / "r.db"
    # Cold (start-up caches written) then warm (read), in a private cache kept secret-free too.
    env = {"DEPLOY_TOKEN": secret, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for _cold_then_warm in range(2):
        done = cli("--output", "json", "run", str(wf), "--db", str(db), env=env)
        assert done.rc == 0, done.stderr
        assert done.data["output"]["leak"]["stdout"] == "token=[REDACTED]\n"
        shown = cli("--output", "json", "inspect", done.data["runId"], "--db", str(db), env=env)
        for text in (done.stdout, done.stderr, shown.stdout, shown.stderr):
            assert secret not in text
    assert list((tmp_path / "cache" / "agentctl").iterdir())  # the caches were written
    for path in [*(tmp_path / "state").rglob("*"), *(tmp_path / "cache").rglob("*")]:
        if path.is_file():
            os.chmod(path, 0o600)
            assert secret.encode() not in path.read_bytes(), path
    assert secret not in ledger_target.contents(db)  # PostgreSQL's rows, or the file again
    effect = next(e for e in shown.data["effects"] if e["taskId"] == "leak")
    assert effect["request"]["input"]["env"]["TOKEN"]["source"] == "env:DEPLOY_TOKEN"


def test_runaway_output_is_stopped_and_the_coordinator_stays_small(
    start_cli: StartCli, write_workflow: Callable[[str], Path], tmp_path: Path
) -> None:
    wf = write_workflow(
        HEAD
        + """\
  policy: { approval: never, processAllowlist: [head] }
  actions:
    flood: { kind: builtin.shell.exec, command: /usr/bin/head, args: ["-c", "100000000", "/dev/zero"], timeoutSeconds: 60 }
  tasks: [ { id: flood, uses: "action:flood" } ]
"""
    )
    proc = start_cli("--output", "json", "run", str(wf), "--db", str(tmp_path / "r.db"))
    coordinator = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        try:
            peak = max(peak, coordinator.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        time.sleep(0.02)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 4, err
    assert "limit" in err.lower()
    assert peak < 200 * 1024 * 1024, f"coordinator peaked at {peak / 1e6:.0f} MB"


def _podman_image() -> str | None:
    if shutil.which("podman") is None:
        return None
    got = subprocess.run(
        ["podman", "image", "inspect", "localhost/agentctl-test:1", "--format", "{{.Digest}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    digest = got.stdout.strip()
    return f"localhost/agentctl-test@{digest}" if got.returncode == 0 and digest else None


CONTAINER = (
    HEAD
    + """\
  policy: { approval: never, processAllowlist: [sh] }
  actions:
    probe:
      kind: builtin.shell.exec
      command: /bin/sh
      args: ["-c", "id -u; touch /workspace/x 2>/dev/null && echo wrote || echo readonly; cat /proc/net/dev | tail -n +3 | cut -d: -f1"]
      timeoutSeconds: 60
      isolation: container
      container: { image: "IMAGE", runtime: podman }
  tasks: [ { id: probe, uses: "action:probe" } ]
"""
)


@pytest.mark.container
def test_container_action_is_isolated(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    image = _podman_image()
    if image is None:
        pytest.skip("podman or localhost/agentctl-test:1 missing (run scripts/setup-system.sh)")
    wf = write_workflow(CONTAINER.replace("IMAGE", image))
    done = cli("--output", "json", "run", str(wf), "--db", str(tmp_path / "r.db"), timeout=180)
    assert done.rc == 0, done.stderr
    lines = done.data["output"]["probe"]["stdout"].split()
    assert lines == ["65532", "readonly", "lo"]
    assert not (tmp_path / "x").exists()


FAILING_CONTAINER = (
    HEAD
    + """\
  policy: { approval: never, processAllowlist: [sh], environmentAllowlist: [DEPLOY_TOKEN] }
  actions:
    probe:
      kind: builtin.shell.exec
      command: /bin/sh
      args: ["-c", "id -u; echo token=$TOKEN >&2; exit 7"]
      env: { TOKEN: { env: DEPLOY_TOKEN } }
      timeoutSeconds: 60
      isolation: container
      container: { image: "IMAGE", runtime: podman }
  tasks: [ { id: probe, uses: "action:probe" } ]
"""
)


@pytest.mark.container
def test_a_failed_container_process_keeps_its_exit_code_and_output(  # type: ignore[no-untyped-def]
    cli, write_workflow, tmp_path: Path
) -> None:
    """As on the host: the exit code and redacted output on the effect and the task."""
    image = _podman_image()
    if image is None:
        pytest.skip("podman or localhost/agentctl-test:1 missing (run scripts/setup-system.sh)")
    wf = write_workflow(FAILING_CONTAINER.replace("IMAGE", image))
    db = tmp_path / "r.db"
    env = {"DEPLOY_TOKEN": "s3cr3t" + os.urandom(8).hex()}
    done = cli("--output", "json", "run", str(wf), "--db", str(db), env=env, timeout=180)
    assert done.rc == 4, done.stderr
    shown = cli("--output", "json", "inspect", done.error["error"]["runId"], "--db", str(db))
    expected = {"status": "failed", "changed": True, "exitCode": 7}
    expected |= {"stdout": "65532\n", "stderr": "token=[REDACTED]\n"}
    assert shown.data["tasks"][0]["output"] == expected
    assert shown.data["effects"][0]["result"] == expected
    assert env["DEPLOY_TOKEN"] not in shown.stdout + done.stderr


@pytest.mark.container
@pytest.mark.parametrize("broken", ["image", "engine"])
def test_container_preflight_fails_closed(broken: str, cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    image = _podman_image() or "localhost/agentctl-test@sha256:" + "0" * 64
    if broken == "image":
        image = image.split("@")[0] + "@sha256:" + "a" * 64
    wf = write_workflow(CONTAINER.replace("IMAGE", image))
    env = {"PATH": "/nonexistent"} if broken == "engine" else None
    db = tmp_path / "r.db"
    done = cli("--output", "json", "run", str(wf), "--db", str(db), env=env, timeout=120)
    assert done.rc == 4
    assert "container isolation unavailable" in done.error["error"]["message"]
    assert not db.exists(), "preflight must fail before any run or effect row exists"


def test_check_mode_previews_without_mutating(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "a.txt").write_text("old\n")
    wf = write_workflow(
        HEAD
        + """\
  policy: { writableRoots: [out], processAllowlist: [sh] }
  memory: { working: {} }
  actions:
    save: { kind: builtin.write }
    touch: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo ran > out/ran.txt"] }
    look: { kind: builtin.read }
  tasks:
    - { id: save, uses: "action:save", with: { path: out/a.txt, content: "new\\n" } }
    - { id: touch, uses: "action:touch" }
    - { id: look, uses: "action:look", with: { path: out/a.txt } }
"""
    )
    db = tmp_path / "r.db"
    done = cli("--output", "json", "run", str(wf), "--db", str(db), "--check")
    assert done.rc == 0, done.stderr
    out = done.data["output"]
    assert out["save"]["diff"] == "--- a/out/a.txt\n+++ b/out/a.txt\n@@ -1 +1 @@\n-old\n+new\n"
    assert out["touch"]["status"] == "requires_execution"
    assert out["look"]["content"] == "old\n"  # observe work really runs
    assert (tmp_path / "out" / "a.txt").read_text() == "old\n"
    assert not (tmp_path / "out" / "ran.txt").exists()
    data = cli("--output", "json", "inspect", done.data["runId"], "--db", str(db)).data
    assert data["run"]["mode"] == "check"
    assert [e["operation"] for e in data["effects"]] == ["builtin.read"]
    assert data["approvals"] == []


@pytest.mark.parametrize("kind", ["file", "process"])
def test_file_and_process_secret_references(kind: str, cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    secret = "k-" + os.urandom(6).hex()
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "token").write_text(secret + "\n")
    ref = (
        "{ file: secrets/token }"
        if kind == "file"
        else f'{{ process: {{ command: /bin/cat, args: ["{tmp_path / "secrets" / "token"}"] }} }}'
    )
    wf = write_workflow(
        HEAD
        + f"""\
  policy: {{ approval: never, processAllowlist: [sh], secretFileRoots: [secrets], secretProcessAllowlist: [cat] }}
  actions:
    use: {{ kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo got=$TOKEN"], env: {{ TOKEN: {ref} }} }}
  tasks: [ {{ id: use, uses: "action:use" }} ]
"""
    )
    db = tmp_path / "state" / "r.db"
    done = cli("--output", "json", "run", str(wf), "--db", str(db))
    assert done.rc == 0, done.stderr
    assert done.data["output"]["use"]["stdout"] == "got=[REDACTED]\n"
    for path in (tmp_path / "state").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    shown = cli("--output", "json", "inspect", done.data["runId"], "--db", str(db))
    [effect] = shown.data["effects"]
    assert effect["request"]["input"]["env"]["TOKEN"]["source"].startswith(kind + ":")
    assert secret not in shown.stdout


def test_secret_file_outside_its_roots_is_denied(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "token").write_text("nope")
    wf = write_workflow(
        HEAD
        + """\
  policy: { approval: never, processAllowlist: [sh], secretFileRoots: [secrets] }
  actions:
    use: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "true"], env: { T: { file: elsewhere/token } } }
  tasks: [ { id: use, uses: "action:use" } ]
"""
    )
    done = cli("--output", "json", "run", str(wf), "--db", str(tmp_path / "r.db"))
    assert done.rc == 4
    assert "secretFileRoots" in done.error["error"]["message"]


@pytest.mark.parametrize("roots", ['[""]', '["  "]', '[secrets, "\\t"]'])
def test_an_empty_secret_file_root_is_refused_by_check(  # type: ignore[no-untyped-def]
    cli, write_workflow, tmp_path: Path, roots: str
) -> None:
    """An empty or blank ``secretFileRoots`` entry names no directory: a run joined it to the
    workspace and read a ``{file}`` secret from anywhere in it. ``check`` refuses it at the
    entry (exit 2), and ``run`` creates nothing."""
    (tmp_path / "token").write_text("s3cret")
    wf = write_workflow(
        HEAD
        + f"""\
  policy: {{ approval: never, processAllowlist: [sh], secretFileRoots: {roots} }}
  actions:
    use: {{ kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "true"], env: {{ T: {{ file: token }} }} }}
  tasks: [ {{ id: use, uses: "action:use" }} ]
"""
    )
    checked = cli("--output", "json", "check", str(wf))
    assert checked.rc == 2, checked.stdout
    [diag] = checked.error["diagnostics"]
    assert diag["code"] == "schema_violation"
    assert diag["path"].startswith("spec.policy.secretFileRoots.")
    assert "secretFileRoots" in diag["message"] and "empty" in diag["message"]
    ran = cli("--output", "json", "run", str(wf), "--db", str(tmp_path / "r.db"))
    assert ran.rc == 2 and "secretFileRoots" in ran.error["error"]["message"]
    assert not (tmp_path / "r.db").exists()
