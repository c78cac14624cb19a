"""``agentctl doctor`` on the programs a workflow's process actions start, held against `run`.

Each case runs doctor and then the workflow itself, on real executables in real temporary
directories: doctor's answer (ready or not, and why) must be the run's (succeeds, or fails
on the program), whatever directory doctor is called from and whatever its own PATH holds.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import Cli

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: programs }
spec:
  policy: { approval: never, processAllowlist: ALLOW }
  actions:
    step: ACTION
  tasks:
    - { id: step, uses: "action:step" }
"""


def _workflow(where: Path, allow: list[str], action: str) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    wf = where / "wf.yaml"
    text = WORKFLOW.replace("ALLOW", "[" + ", ".join(allow) + "]")
    wf.write_text(text.replace("ACTION", action))
    return wf


def _script(path: Path, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho from-script\n")
    path.chmod(mode)
    return path


def _checks(data: dict[str, object]) -> dict[str, dict[str, object]]:
    checks = data["checks"]
    assert isinstance(checks, list)
    return {str(c["check"]): c for c in checks}


def _doctor(cli: Cli, wf: Path, cwd: Path, env: dict[str, str] | None = None) -> dict[str, object]:
    done = cli("--output", "json", "doctor", str(wf), cwd=cwd, env=env)
    assert done.rc == (0 if done.data["ready"] else 6), done.stderr
    data: dict[str, object] = done.data
    return data


def _run(cli: Cli, wf: Path, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    done = cli("--output", "json", "run", str(wf), "--db", str(cwd / "r.db"), cwd=cwd, env=env)
    return done.rc, done.stdout + done.stderr


def test_a_missing_absolute_program_is_not_ready_even_when_its_name_is_on_path(
    cli: Cli, tmp_path: Path
) -> None:
    # `echo` is on PATH and allowlisted, but the action runs another file, which is absent.
    missing = tmp_path / "nowhere" / "echo"
    wf = _workflow(tmp_path / "wf", ["echo"], f"{{ kind: builtin.shell.exec, command: {missing} }}")
    data = _doctor(cli, wf, tmp_path)
    assert data["ready"] is False
    check = _checks(data)[f"process {missing}"]
    assert (check["available"], check["status"]) == (False, "not_found")
    assert str(missing) in str(check["detail"]) and "action step" in str(check["detail"])
    rc, said = _run(cli, wf, tmp_path)
    assert rc == 4 and "cannot start process" in said


def test_a_program_the_allowlist_refuses_is_not_ready_and_unused_entries_are_named(
    cli: Cli, tmp_path: Path
) -> None:
    wf = _workflow(tmp_path / "wf", ["echo"], "{ kind: builtin.shell.exec, command: /bin/cat }")
    data = _doctor(cli, wf, tmp_path)
    assert data["ready"] is False
    checks = _checks(data)
    assert checks["process /bin/cat"]["status"] == "not_allowed"
    assert "'cat' is not in policy.processAllowlist" in str(checks["process /bin/cat"]["detail"])
    unused = checks["process allowlist entry echo"]
    assert (unused["available"], unused["status"]) == (True, "unused")
    rc, said = _run(cli, wf, tmp_path)
    assert rc == 4 and "'cat' is not in policy.processAllowlist" in said


def test_a_relative_program_is_found_in_the_workspace_from_any_directory(
    cli: Cli, tmp_path: Path
) -> None:
    # Doctor called from elsewhere: ./hello.sh is the workspace's (the file's dir), as in a run.
    wf = _workflow(
        tmp_path / "wf", ["hello.sh"], "{ kind: builtin.shell.exec, command: ./hello.sh }"
    )
    script = _script(tmp_path / "wf" / "hello.sh")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    data = _doctor(cli, wf, elsewhere)
    assert data["ready"] is True
    check = _checks(data)["process ./hello.sh"]
    assert (check["status"], check["detail"]) == ("found", f"{script} (action step)")
    rc, said = _run(cli, wf, elsewhere)
    assert rc == 0 and "from-script" in said


def test_a_relative_program_in_the_actions_cwd_and_a_cwd_that_is_missing(
    cli: Cli, tmp_path: Path
) -> None:
    action = "{ kind: builtin.shell.exec, command: ./tool.sh, cwd: tools }"
    wf = _workflow(tmp_path / "wf", ["tool.sh"], action)
    data = _doctor(cli, wf, tmp_path)
    assert _checks(data)["process ./tool.sh in tools"]["status"] == "bad_cwd"
    assert _run(cli, wf, tmp_path)[0] == 4
    _script(tmp_path / "wf" / "tools" / "tool.sh")
    data = _doctor(cli, wf, tmp_path)
    assert data["ready"] is True
    assert _run(cli, wf, tmp_path)[0] == 0


def test_a_file_that_is_not_executable_is_not_ready(cli: Cli, tmp_path: Path) -> None:
    wf = _workflow(
        tmp_path / "wf", ["notes.sh"], "{ kind: builtin.shell.exec, command: ./notes.sh }"
    )
    _script(tmp_path / "wf" / "notes.sh", mode=0o644)
    if os.access(tmp_path / "wf" / "notes.sh", os.X_OK):
        pytest.skip("this user may execute any file")
    data = _doctor(cli, wf, tmp_path)
    assert _checks(data)["process ./notes.sh"]["status"] == "not_executable"
    assert _run(cli, wf, tmp_path)[0] == 4


def test_a_bare_name_is_looked_up_on_the_processes_path_not_doctors(
    cli: Cli, tmp_path: Path
) -> None:
    # The program is on doctor's PATH only: a run clears the environment, so its process
    # looks in the system default PATH and cannot start it.
    bin_dir = tmp_path / "bin"
    _script(bin_dir / "agentctl-doctor-tool")
    theirs = {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    bare = "{ kind: builtin.shell.exec, command: agentctl-doctor-tool }"
    wf = _workflow(tmp_path / "wf", ["agentctl-doctor-tool"], bare)
    data = _doctor(cli, wf, tmp_path, env=theirs)
    check = _checks(data)["process agentctl-doctor-tool"]
    assert (data["ready"], check["status"]) == (False, "not_found")
    assert "env.PATH" in str(check["detail"])
    assert _run(cli, wf, tmp_path, env=theirs)[0] == 4


def _allowed_unverified_and_runs(
    cli: Cli, data: dict[str, object], name: str, wf: Path, cwd: Path
) -> None:
    """Doctor allows ``name`` and lists its program as not verified; the run starts it."""
    unverified = data["unverified"]
    assert isinstance(unverified, list)
    assert (data["ready"], _checks(data)[name]["status"]) == (True, "allowed")
    assert {"what": "program", "target": name} in [
        {"what": u["what"], "target": u["target"]} for u in unverified
    ]
    rc, said = _run(cli, wf, cwd)
    assert rc == 0 and "from-script" in said


def test_a_bare_name_on_the_path_its_action_sets_is_named_unverified(
    cli: Cli, tmp_path: Path
) -> None:
    # The action's PATH is a template (or a secret reference): known only as the task runs.
    bin_dir = tmp_path / "bin"
    _script(bin_dir / "agentctl-doctor-tool")
    action = '{ kind: builtin.shell.exec, command: agentctl-doctor-tool, env: { PATH: "${{ vars.bin }}" } }'
    wf = _workflow(tmp_path / "wf", ["agentctl-doctor-tool"], action)
    wf.write_text(wf.read_text().replace("spec:\n", f"spec:\n  vars: {{ bin: {bin_dir} }}\n"))
    data = _doctor(cli, wf, tmp_path)
    name = "process agentctl-doctor-tool with its own PATH"
    _allowed_unverified_and_runs(cli, data, name, wf, tmp_path)


def test_a_program_in_a_cwd_its_task_renders_is_named_unverified(cli: Cli, tmp_path: Path) -> None:
    # The directory is a template: known only as the task runs (it was judged as the literal
    # text, a directory that does not exist: "bad_cwd", though the run starts the program).
    _script(tmp_path / "wf" / "tools" / "tool.sh")
    action = '{ kind: builtin.shell.exec, command: ./tool.sh, cwd: "${{ vars.dir }}" }'
    wf = _workflow(tmp_path / "wf", ["tool.sh"], action)
    wf.write_text(wf.read_text().replace("spec:\n", "spec:\n  vars: { dir: tools }\n"))
    data = _doctor(cli, wf, tmp_path)
    name = "process ./tool.sh in ${{ vars.dir }}"
    _allowed_unverified_and_runs(cli, data, name, wf, tmp_path)


def test_an_allowlist_entry_no_task_uses_does_not_make_it_not_ready(
    cli: Cli, tmp_path: Path
) -> None:
    allow = ["echo", "agentctl-no-such-program"]
    wf = _workflow(tmp_path / "wf", allow, "{ kind: builtin.shell.exec, command: /bin/echo }")
    data = _doctor(cli, wf, tmp_path)
    assert data["ready"] is True
    checks = _checks(data)
    assert checks["process allowlist entry agentctl-no-such-program"]["status"] == "unused"
    assert "process allowlist entry echo" not in checks  # /bin/echo uses it
    assert _run(cli, wf, tmp_path)[0] == 0


def test_a_kind_the_policy_denies_by_name_is_not_ready(cli: Cli, tmp_path: Path) -> None:
    wf = _workflow(tmp_path / "wf", ["echo"], "{ kind: builtin.shell.exec, command: /bin/echo }")
    wf.write_text(
        wf.read_text().replace("approval: never,", "approval: never, toolsDeny: [process.exec],")
    )
    data = _doctor(cli, wf, tmp_path)
    check = _checks(data)["process /bin/echo"]
    assert (data["ready"], check["status"]) == (False, "denied")
    rc, said = _run(cli, wf, tmp_path)
    assert rc == 4 and "policy.toolsDeny" in said


def test_a_cwd_an_earlier_write_makes_under_a_writable_root_is_unverified(
    cli: Cli, tmp_path: Path
) -> None:
    # The run's write makes out/sub before the process starts there: doctor said bad_cwd
    # (not ready, exit 6) for a workflow that runs. Outside a writable root nothing makes it.
    action = "{ kind: builtin.shell.exec, command: /bin/true, cwd: out/sub }"
    wf = _workflow(tmp_path / "wf", ["true"], action)
    writes = (
        '    - { id: w, uses: "action:save", with: { path: out/sub/f.txt, content: x } }\n'
        '    - { id: step, uses: "action:step", needs: [w] }\n'
    )
    text = wf.read_text().replace('    - { id: step, uses: "action:step" }\n', writes)
    text = text.replace("  actions:\n", "  actions:\n    save: { kind: builtin.write }\n")
    wf.write_text(text.replace("approval: never,", "approval: never, writableRoots: [out],"))
    data = _doctor(cli, wf, tmp_path)
    name = "process /bin/true in out/sub"
    assert (data["ready"], _checks(data)[name]["status"]) == (True, "allowed"), data
    assert {"what": "cwd", "target": name} in [
        {"what": u["what"], "target": u["target"]}
        for u in data["unverified"]  # type: ignore[attr-defined]
    ]
    assert _run(cli, wf, tmp_path)[0] == 0
    shutil.rmtree(tmp_path / "wf" / "out")
    wf.write_text(text)  # no writable root: nothing can make the directory
    refused = cli("--output", "json", "doctor", str(wf), cwd=tmp_path)
    assert refused.rc in (2, 6), refused.stdout
