"""What ``check`` now judges, seen from the command line: a literal ``cwd`` every run would deny
and a template in a router case are refused before a run is created (exit 2), while ``./``
(like ``.``) is the workspace itself; a document
nested 128 levels deep runs, is stored and is shown without a traceback; and a command-line
variable's problem names no workflow file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli

HEAD = "apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\nmetadata: { name: w }\nspec:\n"
ROUTED = (
    HEAD
    + """\
  inputs: { k: x }
  actions: { set: { kind: builtin.assign } }
  tasks:
    - { id: r, uses: router, route: { select: "${{ inputs.k }}", cases: [ { equals: EQUALS, tasks: [a] } ], default: [b] } }
    - { id: a, uses: "action:set", needs: [r], with: { v: 1 } }
    - { id: b, uses: "action:set", needs: [r], with: { v: 2 } }
"""
)
SHELL = (
    HEAD
    + """\
  policy: { approval: never, processAllowlist: [echo] }
  actions: { hi: { kind: builtin.shell.exec, command: /bin/echo, args: [hi], cwd: CWD } }
  tasks: [ { id: t, uses: "action:hi" } ]
"""
)


def _runs(cli: Cli) -> list[Any]:
    listed = cli("--output", "json", "runs", "list", "--db", "r.db")
    return list(listed.data["runs"]) if listed.rc == 0 else []


def test_a_template_in_a_routers_equals_is_refused_before_a_run(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(ROUTED.replace("EQUALS", '"${{ inputs.k }}"'))
    result = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert result.rc == 2, result.stderr
    [diag] = result.error["diagnostics"]
    assert diag["path"] == "spec.tasks.0.route.cases.0.equals"
    assert _runs(cli) == []
    (tmp_path / "wf.yaml").write_text(ROUTED.replace("EQUALS", "x"))
    chosen = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert chosen.data["output"]["r"]["destinations"] == ["a"]


@pytest.mark.parametrize("cwd", ["../", "/", '""'])
def test_a_cwd_every_run_would_deny_is_refused_before_a_run(
    cli: Cli, tmp_path: Path, cwd: str
) -> None:
    (tmp_path / "wf.yaml").write_text(SHELL.replace("CWD", cwd))
    result = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert result.rc == 2, result.stderr
    [diag] = result.error["diagnostics"]
    assert (diag["code"], diag["path"]) == ("schema_violation", "spec.actions.hi.cwd")
    assert _runs(cli) == []


PWD = SHELL.replace("[echo]", "[pwd]").replace("/bin/echo, args: [hi]", "/bin/pwd")


@pytest.mark.parametrize("cwd", [".", "./", '"./"', ".//."])
def test_a_cwd_spelling_the_workspace_runs_the_process_in_the_workspace(
    cli: Cli, tmp_path: Path, cwd: str
) -> None:
    (tmp_path / "wf.yaml").write_text(PWD.replace("CWD", cwd))
    assert cli("check", "wf.yaml").rc == 0
    result = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert result.rc == 0, result.stderr
    assert result.data["output"]["t"]["stdout"] == f"{tmp_path.resolve()}\n"


@pytest.mark.parametrize("cwd", ["out", "./out/"])
def test_a_cwd_through_a_symlink_out_of_the_workspace_is_still_denied(
    cli: Cli, tmp_path: Path, cwd: str
) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "out").symlink_to(tmp_path)
    (tmp_path / "ws" / "wf.yaml").write_text(PWD.replace("CWD", cwd))
    result = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", cwd=tmp_path / "ws")
    assert result.rc == 4, result.stderr
    assert "resolves outside the workspace" in result.error["error"]["message"]


def _nested(levels: int) -> Any:
    value: Any = "leaf"
    for index in range(levels):
        value = {"a": value} if index % 2 else [value]
    return value


def _deep(levels: int) -> str:
    """A workflow of ``levels`` nested containers: the root, spec, tasks, the task and its
    ``with`` are five, the value of ``with.v`` holds the rest."""
    task = {"id": "t", "uses": "action:set", "with": {"v": _nested(levels - 5)}}
    spec = {"actions": {"set": {"kind": "builtin.assign"}}, "tasks": [task]}
    meta = {"apiVersion": "agentctl.dev/v1alpha1", "kind": "Workflow", "metadata": {"name": "w"}}
    return json.dumps({**meta, "spec": spec})


def test_a_document_nested_128_levels_runs_and_is_shown(cli: Cli, tmp_path: Path) -> None:
    # The run's output nests the value deeper still (the task output, the run output map).
    (tmp_path / "wf.yaml").write_text(_deep(128))
    assert cli("--output", "json", "check", "wf.yaml").rc == 0
    run = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert run.rc == 0, run.stderr
    assert run.data["output"]["t"]["output"]["v"] == _nested(123)
    run_id = run.data["runId"]
    for args in (("--output", "json", "inspect"), ("--verbose", "inspect"), ("replay",)):
        shown = cli(*args, run_id, "--db", "r.db")
        assert shown.rc == 0 and "Traceback" not in shown.stderr + shown.stdout, shown.stderr
    (tmp_path / "wf.yaml").write_text(_deep(129))
    refused = cli("--output", "json", "check", "wf.yaml")
    assert refused.rc == 2 and "128 levels" in refused.error["error"]["message"]


def test_a_reserved_command_line_variable_names_no_file(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(ROUTED.replace("EQUALS", "x"))
    result = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", "--var", "foreachIndex=3")
    assert result.rc == 2
    [diag] = result.error["diagnostics"]
    assert "command line" in diag["message"]
    assert (diag["file"], diag["line"], diag["path"]) == (None, None, None)
    human = cli("run", "wf.yaml", "--db", "r.db", "--var", "foreachIndex=3")
    assert human.rc == 2 and "-->" not in human.stderr, human.stderr
