"""The plain ``check FILE`` / ``run FILE`` command lines, parsed without typer (``cli_fast``).

Each fast command line is compared with the same command spelt so that typer parses it: the
options first, then ``--`` and FILE (``--`` is outside the fast grammar, and after it click
takes FILE as the positional it is). Both must give the same exit code, stdout and stderr;
which parser ran is read from Python's import log (typer imported or not).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import cli_env

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ONE_TASK = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: one-task }
spec:
  inputs: { who: world }
  actions: { keep: { kind: builtin.assign } }
  tasks:
    - { id: only, uses: "action:keep", with: { greeting: "hello ${{ inputs.who }}" } }
"""
SLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: slow }
spec:
  policy: { approval: never, processAllowlist: [sleep] }
  actions: { nap: { kind: builtin.shell.exec, command: /bin/sleep, args: ["60"] } }
  tasks:
    - { id: nap, uses: "action:nap" }
"""
BROKEN = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: broken }
spec:
  actions: { keep: { kind: builtin.assign, retries: 2 } }
  tasks:
    - { id: only, uses: "action:nope" }
"""


def _agentctl(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], bool]:
    """Run ``agentctl ARGS``; (the result, whether typer was imported)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "agentctl", *args],
        cwd=cwd,
        env=cli_env(env),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    log = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    typer = any(line.rsplit("|", 1)[1].strip() == "typer" for line in log)
    stderr = "".join(line + "\n" for line in done.stderr.splitlines() if line not in log)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout, stderr), typer


def _same(cwd: Path, fast: list[str], typer_form: list[str]) -> subprocess.CompletedProcess[str]:
    """Run both spellings; they must agree (run ids and times aside). Returns the fast one."""
    quick, quick_typer = _agentctl(cwd, *fast)
    slow, slow_typer = _agentctl(cwd, *typer_form)
    assert not quick_typer, f"{fast} was parsed by typer"
    assert slow_typer, f"{typer_form} was not parsed by typer"
    assert (quick.returncode, _stable(quick.stdout), _stable(quick.stderr)) == (
        slow.returncode,
        _stable(slow.stdout),
        _stable(slow.stderr),
    )
    return quick


def _stable(text: str) -> str:
    text = re.sub(r"run-[0-9a-f-]{36}", "RUN", text)
    text = re.sub(r"trace-?[0-9a-f-]{32,36}|\b[0-9a-f]{32}\b", "TRACE", text)
    return re.sub(r"\d{4}-\d\d-\d\dT[0-9:.]+Z?", "TIME", text)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "one.yaml").write_text(ONE_TASK, encoding="utf-8")
    (tmp_path / "broken.yaml").write_text(BROKEN, encoding="utf-8")
    (tmp_path / "slow.yaml").write_text(SLOW, encoding="utf-8")
    (tmp_path / "hello.yaml").write_text((EXAMPLES / "hello.yaml").read_text(), encoding="utf-8")
    (tmp_path / "vars.yaml").write_text("region: eu\n", encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    ("fast", "typer_form"),
    [
        (["check", "hello.yaml"], ["check", "--", "hello.yaml"]),
        (
            ["--output", "json", "check", "hello.yaml"],
            ["check", "--output", "json", "--", "hello.yaml"],
        ),
        (["check", "broken.yaml"], ["check", "--", "broken.yaml"]),
        (
            ["check", "broken.yaml", "--output=json"],
            ["--output=json", "check", "--", "broken.yaml"],
        ),
        (["check", "missing.yaml"], ["check", "--", "missing.yaml"]),
        (["check", "."], ["check", "--", "."]),
        (["check", "one.yaml", "--var", "x=1"], ["check", "--var", "x=1", "--", "one.yaml"]),
        (["check", "one.yaml", "--var=x"], ["check", "--var=x", "--", "one.yaml"]),
        (
            ["check", "one.yaml", "--vars-file", "vars.yaml", "--vars-file=nope.yaml"],
            ["check", "--vars-file", "vars.yaml", "--vars-file=nope.yaml", "--", "one.yaml"],
        ),
        (
            ["check", "one.yaml", "--workspace", "."],
            ["check", "--workspace", ".", "--", "one.yaml"],
        ),
        (
            ["check", "one.yaml", "--workspace=nowhere"],
            ["check", "--workspace=nowhere", "--", "one.yaml"],
        ),
        (  # click checks the options before FILE: the bad workspace is the error
            ["check", "http://x.yaml", "--workspace", "nowhere"],
            ["check", "--workspace", "nowhere", "--", "http://x.yaml"],
        ),
        (  # ... and the options in the order given
            ["check", "one.yaml", "--vars-file", "http://v", "--workspace", "nowhere"],
            ["check", "--vars-file", "http://v", "--workspace", "nowhere", "--", "one.yaml"],
        ),
        (
            ["check", "one.yaml", "--workspace", "nowhere", "--vars-file", "http://v"],
            ["check", "--workspace", "nowhere", "--vars-file", "http://v", "--", "one.yaml"],
        ),
    ],
)
def test_check_gives_what_typer_gives(work: Path, fast: list[str], typer_form: list[str]) -> None:
    _same(work, fast, typer_form)


@pytest.mark.parametrize(
    ("fast", "typer_form"),
    [
        (["run", "one.yaml"], ["run", "--", "one.yaml"]),
        (
            ["--output", "json", "run", "one.yaml", "--input", "who=you", "--db", "other.db"],
            ["--output", "json", "run", "--input", "who=you", "--db", "other.db", "--", "one.yaml"],
        ),
        (
            ["run", "one.yaml", "--inputs", '{"who": "me"}', "--check", "--diff"],
            ["run", "--inputs", '{"who": "me"}', "--check", "--diff", "--", "one.yaml"],
        ),
        (["run", "one.yaml", "--inputs", "[1]"], ["run", "--inputs", "[1]", "--", "one.yaml"]),
        (
            ["run", "one.yaml", "--inputs-file", "x"],
            ["run", "--inputs-file", "x", "--", "one.yaml"],
        ),
        (
            ["run", "one.yaml", "--workspace", "nowhere", "--db", "sub"],
            ["run", "--workspace", "nowhere", "--db", "sub", "--", "one.yaml"],
        ),
        (["run", "one.yaml", "--db", "."], ["run", "--db", ".", "--", "one.yaml"]),
        (
            ["run", "http://x.yaml", "--workspace", "nowhere", "--db", "sub"],
            ["run", "--workspace", "nowhere", "--db", "sub", "--", "http://x.yaml"],
        ),
        (["run", "broken.yaml"], ["run", "--", "broken.yaml"]),
        (
            ["run", "one.yaml", "--timeout-seconds", "30"],
            ["run", "--timeout-seconds", "30", "--", "one.yaml"],
        ),
        (  # a run that cannot end before its deadline: no race between two outcomes
            ["run", "slow.yaml", "--timeout-seconds=0.001"],
            ["run", "--timeout-seconds=0.001", "--", "slow.yaml"],
        ),
    ],
)
def test_run_gives_what_typer_gives(work: Path, fast: list[str], typer_form: list[str]) -> None:
    (work / "sub").mkdir()
    _same(work, fast, typer_form)


@pytest.mark.parametrize("workspace", [[], ["--workspace", "."], ["--workspace", "flows"]])
def test_a_fast_check_reads_var_files_from_its_workspace(work: Path, workspace: list[str]) -> None:
    """flows/wf.yaml reads flows/link.yaml → ../vars.yaml: outside flows/, inside ``.``."""
    (work / "flows").mkdir()
    (work / "flows" / "link.yaml").symlink_to(work / "vars.yaml")
    text = ONE_TASK.replace("spec:\n", "spec:\n  varsFiles: [link.yaml]\n")
    (work / "flows" / "wf.yaml").write_text(text, encoding="utf-8")
    fast = ["--output", "json", "check", "flows/wf.yaml", *workspace]
    done = _same(work, fast, ["--output", "json", "check", *workspace, "--", "flows/wf.yaml"])
    assert done.returncode == (0 if workspace[1:] == ["."] else 2), done.stderr


def test_a_fast_run_and_check_do_their_work(work: Path) -> None:
    done, _ = _agentctl(work, "--output", "json", "run", "one.yaml", "--input", "who=you")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["data"]["state"] == "succeeded"
    assert outcome["data"]["output"]["only"]["output"] == {"greeting": "hello you"}
    assert (work / ".agentctl" / "runtime.db").is_file()
    checked, _ = _agentctl(work, "--output", "json", "check", "hello.yaml")
    assert json.loads(checked.stdout)["data"]["tasks"] == 3


@pytest.mark.parametrize(
    "args",
    [
        ["check", "--help"],
        ["check", "-h", "one.yaml"],
        ["check", "one.yaml", "two.yaml"],
        ["check"],
        ["check", "one.yaml", "--var"],
        ["check", "one.yaml", "--verbose-ish"],
        ["run", "one.yaml", "--timeout-seconds", "0"],
        ["run", "one.yaml", "--timeout-seconds", "0.0009"],
        ["run", "one.yaml", "--timeout-seconds", "soon"],
        ["run", "one.yaml", "--workspace", "--check"],
        ["run", "one.yaml", "--workspace", "a", "--workspace", "b"],
        ["check", "one.yaml", "--workspace", "a", "--workspace", "b"],
        ["check", "one.yaml", "--workspace"],
        ["run", "one.yaml", "--inputs"],
        ["run", "one.yaml", "--check=yes"],
    ],
)
def test_everything_else_is_typers(work: Path, args: list[str]) -> None:
    """Help pages, usage errors and the rarer options: typer parses them, as before."""
    done, typer = _agentctl(work, *args)
    assert typer
    if "--help" in args or "-h" in args:
        assert done.returncode == 0 and "Usage: agentctl check" in done.stdout
    else:
        assert done.returncode == 2, done.stderr


def test_a_db_from_the_environment_is_read_by_typer(work: Path) -> None:
    """click takes ``--db`` from ``$AGENTCTL_DB`` when the option is absent: typer's rules."""
    env = {"AGENTCTL_DB": "from-env.db"}
    done, typer = _agentctl(work, "run", "one.yaml", "--input", "who=env", env=env)
    assert typer and done.returncode == 0, done.stderr
    assert (work / "from-env.db").is_file() and not (work / ".agentctl").exists()
    checked, typer = _agentctl(work, "check", "one.yaml", env=env)
    assert not typer and checked.returncode == 0, checked.stderr


def test_a_fast_run_keeps_its_deadline(work: Path) -> None:
    """``--timeout-seconds`` on the fast path is the run's deadline: exit 130, cancelled."""
    done, typer = _agentctl(work, "--output", "json", "run", "slow.yaml", "--timeout-seconds", "1")
    assert not typer
    assert done.returncode == 130, done.stderr
    assert json.loads(done.stdout)["data"]["state"] == "cancelled"
