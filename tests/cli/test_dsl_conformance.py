"""Workflow-language conformance found by a black-box sweep (spec/dsl.md), through the CLI.

Each test is a workflow the original accepts or refuses, run as a user runs it: agent
instructions (inline or ``instructionsFile``) are templates rendered per task; ``spec.outputs``
templates are checked before anything runs; diagnostics point at what the user wrote; keys
that could never take effect (a fake provider's endpoint, a URL where a local path belongs)
are refused at ``check``, exit 2, with no state created.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli, CliResult

pytestmark = pytest.mark.sqlite_only(reason="the workflow language, not the ledger backend")

HEAD = "apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\nmetadata: { name: conf }\nspec:\n"
AGENT_WF = (
    HEAD
    + """\
  inputs: { build: b-1 }
  vars: { env: qa }
  providers: { sim: { kind: fake } }
  actions: { put: { kind: builtin.assign } }
  agents: { rev: { provider: sim, model: m, INSTRUCTIONS } }
  tasks:
    - { id: stash, uses: "action:put", with: { owner: ada } }
    - { id: ask, uses: "agent:rev", needs: [stash], with: { prompt: go } }
"""
)


def _write(tmp_path: Path, text: str, name: str = "wf.yaml") -> str:
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text(text, encoding="utf-8")
    return name


def _system_messages(cli: Cli, run: CliResult) -> list[str]:
    """The system message of every model call the run recorded."""
    inspected = cli("--output", "json", "inspect", run.data["runId"], "--db", "db.sqlite")
    effects = inspected.data["effects"]
    return [
        e["request"]["input"]["messages"][0]["content"]
        for e in effects
        if e["effectClass"] == "model"
    ]


def _refused(cli: Cli, tmp_path: Path, wf: str, command: str = "run") -> dict[str, Any]:
    """The one diagnostic of a refused ``command`` (exit 2, no database created)."""
    extra = ("--db", "db.sqlite") if command == "run" else ()
    got = cli("--output", "json", command, wf, *extra)
    assert got.rc == 2, (got.stdout, got.stderr)
    assert not (tmp_path / "db.sqlite").exists()
    (diag,) = got.error["diagnostics"]
    return dict(diag)


def _each_refused(
    cli: Cli, tmp_path: Path, template: str, cases: tuple[tuple[str, str, str], ...]
) -> Iterator[tuple[dict[str, Any], str, str]]:
    """For each (value, expected, needle) case: the diagnostic of running ``template`` with
    ``@@`` replaced by the value, with the case's expectations."""
    for value, expected, needle in cases:
        yield (
            _refused(cli, tmp_path, _write(tmp_path, template.replace("@@", value))),
            expected,
            needle,
        )


def test_inline_instructions_are_rendered_for_each_task(cli: Cli, tmp_path: Path) -> None:
    text = 'instructions: "Review ${{ inputs.build }} for ${{ vars.env }} (${{ tasks.stash.output.output.owner }})."'
    wf = _write(tmp_path, AGENT_WF.replace("INSTRUCTIONS", text))
    run = cli("--output", "json", "run", wf, "--db", "db.sqlite", "--input", 'build="b-7"')
    assert run.rc == 0, run.stderr
    assert _system_messages(cli, run) == ["Review b-7 for qa (ada)."]


def test_instructions_file_is_read_relative_to_the_workflow(cli: Cli, tmp_path: Path) -> None:
    wf = _write(
        tmp_path,
        AGENT_WF.replace("INSTRUCTIONS", "instructionsFile: prompts/rev.md"),
        "flows/wf.yaml",
    )
    prompt = tmp_path / "flows" / "prompts" / "rev.md"
    prompt.parent.mkdir()
    prompt.write_text("Check ${{ inputs.build }} in ${{ vars.env }}.\n", encoding="utf-8")
    first = cli("--output", "json", "plan", wf).data["planDigest"]
    run = cli("--output", "json", "run", wf, "--db", "db.sqlite")
    assert run.rc == 0, run.stderr
    assert _system_messages(cli, run) == ["Check b-1 in qa.\n"]
    # The captured text is part of the plan: editing the file changes its digest.
    prompt.write_text("Something else.\n", encoding="utf-8")
    assert cli("--output", "json", "plan", wf).data["planDigest"] != first


def test_instruction_file_problems_are_located_at_the_key(cli: Cli, tmp_path: Path) -> None:
    for path, content, needle in (
        ("missing.md", None, "does not exist"),
        ("bad.md", b"\xff\xfe", "not UTF-8"),
        ("https://example.com/rev.md", None, "is a URL"),
        ("'${{ inputs.build }}'", None, "not a literal file path"),
    ):
        if content is not None:
            (tmp_path / path).write_bytes(content)
        wf = _write(tmp_path, AGENT_WF.replace("INSTRUCTIONS", f"instructionsFile: {path}"))
        diag = _refused(cli, tmp_path, wf)
        assert diag["code"] == "schema_violation" and needle in diag["message"], diag
        assert diag["path"] == "spec.agents.rev.instructionsFile" and diag["line"] == 9


def test_instruction_templates_are_checked_at_compile_time(cli: Cli, tmp_path: Path) -> None:
    bad = 'instructions: "Do ${{ inputs.build "'
    diag = _refused(cli, tmp_path, _write(tmp_path, AGENT_WF.replace("INSTRUCTIONS", bad)), "check")
    assert (diag["code"], diag["path"]) == ("invalid_template", "spec.agents.rev.instructions")
    unneeded = 'instructions: "${{ tasks.stash.output.output.owner }}"'
    text = AGENT_WF.replace("INSTRUCTIONS", unneeded).replace("needs: [stash], ", "")
    diag = _refused(cli, tmp_path, _write(tmp_path, text), "check")
    assert diag["code"] == "invalid_template" and "without needing `stash`" in diag["message"]
    assert diag["path"] == "spec.tasks.1.needs"


def test_instructions_that_are_not_text_fail_before_any_model_call(
    cli: Cli, tmp_path: Path
) -> None:
    text = AGENT_WF.replace("INSTRUCTIONS", 'instructions: "${{ inputs.meta }}"')
    wf = _write(tmp_path, text.replace("inputs: { build: b-1 }", "inputs: { meta: { a: 1 } }"))
    run = cli("--output", "json", "run", wf, "--db", "db.sqlite")
    assert run.rc == 4 and "must render to text" in run.error["error"]["message"]
    inspected = cli("--output", "json", "inspect", run.error["error"]["runId"], "--db", "db.sqlite")
    assert [e for e in inspected.data["effects"] if e["effectClass"] == "model"] == []


OUTPUTS_WF = (
    HEAD
    + """\
  vars: { v: 1 }
  actions: { put: { kind: builtin.assign } }
  outputs: { a: "${{ tasks.a.output.output }}", r: @@ }
  tasks: [ { id: a, uses: "action:put" } ]
"""
)


def test_run_outputs_are_checked_before_anything_runs(cli: Cli, tmp_path: Path) -> None:
    cases = (
        ('"${{ inputs.x "', "invalid_template", "unclosed template"),
        ('"${{ env.HOME }}"', "invalid_template", "roots are"),
        ('{ deep: ["${{ tasks.zz.output }}"] }', "missing_reference", "unknown task `zz`"),
        ('"${{ tasks.a.status }}"', "invalid_template", "tasks.ID.output"),
        ('"${{ vars.w }}"', "invalid_template", "no workflow-level variable defines"),
    )
    for diag, code, needle in _each_refused(cli, tmp_path, OUTPUTS_WF, cases):
        # A text nested in an output's value is reported at its own path.
        path = "spec.outputs.r.deep.0" if "deep" in diag["path"] else "spec.outputs.r"
        assert (diag["code"], diag["path"], diag["line"]) == (code, path, 7), diag
        assert code != "missing_reference" or path.endswith("deep.0"), diag
        assert needle in diag["message"], diag
    wf = _write(tmp_path, OUTPUTS_WF.replace("@@", '"n=${{ tasks.a.output.output }}"'))
    assert cli("--output", "json", "check", wf).rc == 0
    # the workflow's own variables are the run's: the outputs may read them
    wf = _write(tmp_path, OUTPUTS_WF.replace("@@", '"${{ vars.v }}"'))
    assert cli("--output", "json", "check", wf).rc == 0


def test_a_loop_guard_problem_points_at_its_while(cli: Cli, tmp_path: Path) -> None:
    text = (
        HEAD
        + """\
  actions: { put: { kind: builtin.assign } }
  tasks:
    - { id: poll, uses: "action:put", loop: { maxIterations: 2, while: "${{ tasks.zz.output.more }}" } }
"""
    )
    diag = _refused(cli, tmp_path, _write(tmp_path, text), "check")
    assert (diag["code"], diag["path"]) == ("missing_reference", "spec.tasks.0.loop.while")
    assert diag["line"] == 7 and diag["column"] > 40


def test_routing_to_an_expanded_task_says_why_it_cannot(cli: Cli, tmp_path: Path) -> None:
    text = (
        HEAD
        + """\
  inputs: { v: go }
  actions: { put: { kind: builtin.assign } }
  tasks:
    - { id: pick, uses: router, route: { select: "${{ inputs.v }}", cases: [ { equals: go, tasks: [fan] } ] } }
    - { id: fan, uses: "action:put", needs: [pick], foreach: { items: [1, 2] } }
"""
    )
    diag = _refused(cli, tmp_path, _write(tmp_path, text), "check")
    assert diag["code"] == "schema_violation" and "expands into child tasks" in diag["message"]
    assert diag["path"] == "spec.tasks.1" and "plain task" in diag["help"]


PROVIDER_WF = (
    HEAD
    + """\
  providers: { sim: @@ }
  agents: { w: { provider: sim, model: m, instructions: hi } }
  tasks: [ { id: t, uses: "agent:w", with: { prompt: one } } ]
"""
)


def test_provider_keys_that_could_never_be_used_are_refused(cli: Cli, tmp_path: Path) -> None:
    cases = (
        ('{ kind: fake, endpoint: "https://fake.example.com" }', "endpoint", "makes no requests"),
        ("{ kind: fake, credential: { env: FAKE_KEY } }", "credential", "makes no requests"),
        ('{ kind: openai, endpoint: "not a url" }', "endpoint", "not an absolute http(s) URL"),
        ('{ kind: openai, endpoint: "ftp://x.example.com/v1" }', "endpoint", "http(s) URL"),
    )
    for diag, key, needle in _each_refused(cli, tmp_path, PROVIDER_WF, cases):
        assert diag["code"] == "schema_violation" and needle in diag["message"], diag
        assert diag["path"] == f"spec.providers.sim.{key}" and diag["line"] == 5


def test_urls_are_not_taken_as_local_paths(cli: Cli, tmp_path: Path) -> None:
    task = (
        '  actions: { put: { kind: builtin.assign } }\n  tasks: [ { id: a, uses: "action:put" } ]\n'
    )
    for spec, path in (
        ('  varsFiles: ["https://example.com/v.yaml"]\n', "spec.varsFiles.0"),
        (
            '  policy: { writableRoots: ["https://example.com/out"] }\n',
            "spec.policy.writableRoots.0",
        ),
        ('  policy: { workspaceRoot: "s3://bucket" }\n', "spec.policy.workspaceRoot"),
        (
            '  policy: { secretFileRoots: ["https://example.com"] }\n',
            "spec.policy.secretFileRoots.0",
        ),
    ):
        diag = _refused(cli, tmp_path, _write(tmp_path, HEAD + spec + task))
        assert diag["code"] == "schema_violation" and "is a URL" in diag["message"], diag
        assert diag["path"] == path


def test_the_workspace_root_confines_reads_writes_and_processes(cli: Cli, tmp_path: Path) -> None:
    """policy.workspaceRoot (spec/dsl.md §7) is the directory the run's paths resolve in: it
    used to be parsed and ignored, so `sub` confined nothing to `sub`."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f.txt").write_text("inside\n", encoding="utf-8")
    (tmp_path / "f.txt").write_text("outside\n", encoding="utf-8")
    body = (
        "  actions: { rd: { kind: builtin.read }, wr: { kind: builtin.write },"
        " sh: { kind: builtin.shell.exec, command: pwd } }\n"
        '  tasks: [ { id: a, uses: "action:rd", with: { path: f.txt } },'
        ' { id: b, uses: "action:wr", needs: [a], with: { path: o/x, content: "${{ tasks.a.output.content }}" } },'
        ' { id: c, uses: "action:sh" } ]\n'
    )
    policy = "  policy: { approval: never, workspaceRoot: ROOT, writableRoots: [o], processAllowlist: [pwd] }\n"
    ran = cli(
        "--output", "json", "run", _write(tmp_path, HEAD + policy.replace("ROOT", "sub") + body)
    )
    assert ran.rc == 0, ran.stderr
    assert ran.data["output"]["a"]["content"] == "inside\n"
    assert (tmp_path / "sub" / "o" / "x").read_text() == "inside\n"
    assert not (tmp_path / "o").exists()
    assert ran.data["output"]["c"]["stdout"] == f"{(tmp_path / 'sub').resolve()}\n"
    # Out of the workspace with `..`: refused at its line; absolute: taken as it is.
    diag = _refused(cli, tmp_path, _write(tmp_path, HEAD + policy.replace("ROOT", "../up") + body))
    assert diag["code"] == "schema_violation" and diag["path"] == "spec.policy.workspaceRoot"
    assert diag["line"] == 5, diag
    assert cli("check", _write(tmp_path, HEAD + policy.replace("ROOT", "/tmp") + body)).rc == 0
    # A root that is not there: refused before the database exists.
    missing = cli(
        "run", _write(tmp_path, HEAD + policy.replace("ROOT", "gone") + body), "--db", "m.db"
    )
    assert missing.rc == 2 and "policy.workspaceRoot names" in missing.stderr, missing.stderr
    assert not (tmp_path / "m.db").exists()


def test_doctor_resolves_secret_files_and_writable_roots_under_the_workspace_root(
    cli: Cli, tmp_path: Path
) -> None:
    """doctor answers as a run resolves: a secret file and a writable root under
    `workspaceRoot`, taken once (it used to be joined twice for secret files: sub/sub/keys)."""
    (tmp_path / "sub" / "keys").mkdir(parents=True)
    (tmp_path / "sub" / "keys" / "k").write_text("sk-test\n", encoding="utf-8")
    text = HEAD + (
        "  policy: { workspaceRoot: sub, secretFileRoots: [keys], writableRoots: [o] }\n"
        "  providers: { main: { kind: openai, credential: { file: keys/k } } }\n"
        "  agents: { w: { provider: main, model: m, instructions: hi } }\n"
        '  tasks: [ { id: t, uses: "agent:w" } ]\n'
    )
    done = cli("--output", "json", "doctor", _write(tmp_path, text))
    assert done.rc == 0, (done.stdout, done.stderr)
    checks = {c["check"]: c for c in done.data["checks"]}
    assert checks["credential main"]["status"] == "present", checks
    assert str(tmp_path / "sub" / "o") in str(checks["writable root o"]["detail"]), checks


def test_compensating_a_run_whose_agent_reads_an_instruction_file(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "rev.md").write_text("Be careful.\n", encoding="utf-8")
    text = (
        HEAD
        + """\
  policy: { approval: never, writableRoots: [out] }
  providers: { sim: { kind: fake } }
  agents: { w: { provider: sim, model: m, instructionsFile: rev.md } }
  actions: { save: { kind: builtin.write }, check: { kind: builtin.assert } }
  tasks:
    - { id: make, uses: "action:save", with: { path: out/r.txt, content: made },
        compensate: { uses: "action:save", with: { path: out/r.txt, content: undone } } }
    - { id: ask, uses: "agent:w", needs: [make], with: { prompt: hi } }
    - { id: verify, uses: "action:check", needs: [ask], with: { that: false, message: boom } }
"""
    )
    run = cli("--output", "json", "run", _write(tmp_path, text), "--db", "db.sqlite")
    assert run.rc == 4, run.stderr
    run_id = run.error["error"]["runId"]
    done = cli("--output", "json", "compensate", run_id, "--db", "db.sqlite")
    assert done.rc == 0, done.stderr
    assert (tmp_path / "out" / "r.txt").read_text(encoding="utf-8") == "undone"
    assert json.loads(done.stdout)["data"]["state"] == "succeeded"


def test_an_azure_provider_without_api_version_is_refused_at_check(
    cli: Cli, tmp_path: Path
) -> None:
    # Every azure_openai call needs ?api-version=: without one the worker refused the call
    # only after the run and its database existed (exit 4); now `check` says so, exit 2.
    endpoint = '{ kind: azure_openai, endpoint: "https://res.openai.azure.com" }'
    wf = _write(tmp_path, PROVIDER_WF.replace("@@", endpoint))
    for command in ("check", "run"):
        diag = _refused(cli, tmp_path, wf, command)
        assert diag["code"] == "schema_violation" and "apiVersion" in diag["message"], diag
        assert diag["path"] == "spec.providers.sim" and diag["line"] == 5
    given = endpoint.replace(" }", ", apiVersion: 2025-04-01-preview }")
    ok = cli("--output", "json", "check", _write(tmp_path, PROVIDER_WF.replace("@@", given)))
    assert ok.rc == 0, ok.stderr
