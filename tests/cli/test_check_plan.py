"""``agentctl check`` and ``agentctl plan`` from the outside.

Covers the compile-time failing variants spec/dsl.md §10 names for each example (exit 2, the
stated diagnostic code, located at the offending line and column), the ``Plan`` JSON of E3 and
E5 with their pinned expanded ids, human output without ANSI bytes, global flags after the
command, and that neither command creates anything on disk.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import EXAMPLES, Cli

Edit = tuple[str, str]

# (example, edits, diagnostic code, text the reported line must contain)
VARIANTS: dict[str, tuple[str, list[Edit], str, str]] = {
    "e1-without-needs": (
        "e1-dataflow.yaml",
        [("      needs: [stash]", "      # needs removed:")],
        "invalid_template",
        "tasks.stash.output",  # the value that reads it, not its `with:` block
    ),
    "e2-reasoning-on-fake": (
        "e2-agent-router.yaml",
        [("      maxTurns: 2 ", "      reasoning: { effort: low }\n      maxTurns: 2 ")],
        "unsupported_capability",
        "reasoning:",
    ),
    "e3-matrix-over-max-items": (
        "e3-fanout.yaml",
        [("maxItems: 4", "maxItems: 3")],
        "schema_violation",
        "maxItems: 3",
    ),
    "e3-unordered-writers-of-one-key": (
        "e3-fanout.yaml",
        [("with: { key: right, value: R }", "with: { key: left, value: R }")],
        "schema_violation",
        "id: right",
    ),
    "e3-foreach-templated-key-inherits-set": (
        "e3-fanout.yaml",
        [
            (
                "    - id: fan\n      uses: action:put\n",
                "    - id: fan\n      uses: action:remember\n      memoryWrites: [k_dev, k_prod]\n",
            ),
            ('        env: "${{ vars.env }}"', '        key: "k_${{ vars.env }}"'),
            # builtin.memory.write reads only `key` and `value`.
            ('        i: "${{ vars.foreachIndex }}"', '        value: "${{ vars.foreachIndex }}"'),
        ],
        "schema_violation",
        "memoryWrites:",
    ),
    "e4-loop-with-when": (
        "e4-loop.yaml",
        [("      loop:\n", '      when: "${{ inputs.x }}"\n      loop:\n')],
        "schema_violation",
        "loop:",
    ),
    "e5-retry-on-invocation": (
        "e5-subworkflow.yaml",
        [("      with: { word: hi }", "      with: { word: hi }\n      retry: { maxAttempts: 2 }")],
        "schema_violation",
        "retry:",
    ),
    "e5-when-on-invocation": (
        "e5-subworkflow.yaml",
        [("      with: { word: hi }", '      with: { word: hi }\n      when: "${{ inputs.x }}"')],
        "schema_violation",
        "when:",
    ),
    "e5-version-not-semver": (
        "e5-subworkflow.yaml",
        [("version: 0.1.0", "version: v1")],
        "schema_violation",
        "version: v1",
    ),
    "e7-compensate-an-assign": (
        "e7-compensation.yaml",
        [
            (
                "    save: { kind: builtin.write }\n",
                "    save: { kind: builtin.write }\n    put: { kind: builtin.assign }\n",
            ),
            ("    - id: make\n      uses: action:save", "    - id: make\n      uses: action:put"),
        ],
        "unsupported_capability",
        "compensate:",
    ),
    "e8-max-tasks-below-plan": (
        "e8-retry-budget.yaml",
        [("maxTasks: 2", "maxTasks: 1")],
        "schema_violation",
        "maxTasks: 1",
    ),
    "e9-output-limit-on-assign": (
        "e9-process.yaml",
        [
            (
                "    hello:\n",
                "    noop: { kind: builtin.assign, stdoutLimitBytes: 1024 }\n    hello:\n",
            )
        ],
        "schema_violation",
        "stdoutLimitBytes",
    ),
    "e9-unpinned-container-image": (
        "e9-process.yaml",
        [
            (
                "      stdoutLimitBytes: 1024\n",
                "      stdoutLimitBytes: 1024\n      isolation: container\n"
                "      container: { image: 'busybox:latest' }\n",
            )
        ],
        "schema_violation",
        "busybox:latest",
    ),
}


def _variant(tmp_path: Path, example: str, edits: list[Edit]) -> Path:
    text = (EXAMPLES / example).read_text(encoding="utf-8")
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = tmp_path / ("variant-" + example)
    path.write_text(text, encoding="utf-8")
    return path


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("case", sorted(VARIANTS))
def test_failing_variant_is_located(cli: Cli, tmp_path: Path, case: str) -> None:
    example, edits, code, marker = VARIANTS[case]
    path = _variant(tmp_path, example, edits)
    done = cli("--output", "json", "check", path.name)
    assert done.rc == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    envelope = done.error
    assert envelope["kind"] == "Error" and envelope["ok"] is False
    assert envelope["error"]["exitCode"] == 2
    first = envelope["diagnostics"][0]
    assert first["code"] == code, first
    assert first["file"] == path.name
    line, column = first["line"], first["column"]
    assert isinstance(line, int) and isinstance(column, int), first
    text = path.read_text(encoding="utf-8").splitlines()[line - 1]
    assert marker in text, (line, text)
    assert 1 <= column <= len(text) and not text[column - 1].isspace(), (column, text)


# --------------------------------------------------------------------------- plan JSON


def _plan(cli: Cli, example: str) -> dict[str, Any]:
    done = cli("--output", "json", "plan", str(EXAMPLES / example))
    assert done.rc == 0, done.stderr
    envelope = json.loads(done.stdout)
    assert envelope["apiVersion"] == "agentctl.dev/cli/v1" and envelope["kind"] == "Plan"
    data: dict[str, Any] = envelope["data"]
    assert [t["id"] for t in data["tasks"].values()] == list(data["tasks"]) == data["order"]
    return data


def test_plan_of_e3(cli: Cli) -> None:
    data = _plan(cli, "e3-fanout.yaml")
    assert data["name"] == "e3"
    assert data["maxConcurrency"] == 3
    order = data["order"]
    assert order[:2] == ["left", "right"]
    assert [t[:11] for t in order[2:5]] == ["fan--0000-f", "fan--0001-0", "fan"]
    builds = order[5:9]
    assert builds[0] == "build--0000-f4109a71efaf"  # pinned by spec/dsl.md §9
    assert [b[:12] for b in builds] == [f"build--000{i}-" for i in range(4)]
    assert order[9:] == ["build", "report"]
    tasks = data["tasks"]
    matrices = [tasks[b]["bindings"]["matrix"] for b in builds]
    assert [(m["arch"], m["os"]) for m in matrices] == [
        ("amd64", "linux"),
        ("amd64", "mac"),
        ("arm64", "linux"),
        ("arm64", "mac"),
    ]
    assert tasks["build"]["kind"] == "aggregate" and tasks["build"]["children"] == builds
    assert tasks["build"]["needs"] == builds
    assert tasks[order[2]]["bindings"] == {"env": "dev", "foreachIndex": 0}
    assert tasks["report"]["needs"] == ["left", "right", "fan", "build"]


def test_plan_of_e5(cli: Cli) -> None:
    data = _plan(cli, "e5-subworkflow.yaml")
    assert data["name"] == "e5"
    assert data["maxConcurrency"] == 1
    assert data["order"] == ["wrap--inputs-a160ebeb", "wrap--echo", "wrap"]
    boundary, echo, wrap = data["tasks"].values()
    assert boundary["kind"] == "subworkflow_input" and boundary["with"] == {"word": "hi"}
    assert echo["needs"] == ["wrap--inputs-a160ebeb"]
    assert wrap["kind"] == "subworkflow_output"
    assert set(wrap["needs"]) == {"wrap--inputs-a160ebeb", "wrap--echo"}


# --------------------------------------------------------------------------- presentation


@pytest.mark.parametrize("command", ["check", "plan"])
@pytest.mark.parametrize("color", [[], ["--color", "never"]], ids=["auto", "never"])
def test_human_output_has_no_ansi_off_a_tty(cli: Cli, command: str, color: list[str]) -> None:
    done = cli(*color, command, str(EXAMPLES / "e3-fanout.yaml"))
    assert done.rc == 0, done.stderr
    assert "e3" in done.stdout
    assert "\x1b" not in done.stdout and "\x1b" not in done.stderr
    with pytest.raises(json.JSONDecodeError):
        json.loads(done.stdout)


def test_human_error_has_no_ansi_with_color_never(cli: Cli, tmp_path: Path) -> None:
    example, edits, _code, _marker = VARIANTS["e1-without-needs"]
    path = _variant(tmp_path, example, edits)
    done = cli("check", path.name, "--color", "never")
    assert done.rc == 2
    assert "\x1b" not in done.stderr
    assert done.stderr.startswith("error: ")


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "{wf}", "--output", "json"],
        ["plan", "{wf}", "--output=json"],
        ["check", "--output", "json", "{wf}"],
        ["--output", "json", "plan", "{wf}"],
    ],
    ids=["check-after", "plan-after-equals", "check-between", "plan-before"],
)
def test_output_json_anywhere(cli: Cli, argv: list[str]) -> None:
    wf = str(EXAMPLES / "e1-dataflow.yaml")
    done = cli(*[a.replace("{wf}", wf) for a in argv])
    assert done.rc == 0, done.stderr
    envelope = json.loads(done.stdout)
    assert envelope["ok"] is True
    assert envelope["kind"] == ("CheckResult" if "check" in argv else "Plan")


# --------------------------------------------------------------------------- no state


def test_check_and_plan_create_nothing(cli: Cli, tmp_path: Path) -> None:
    examples = ("hello.yaml", "e3-fanout.yaml", "e5-subworkflow.yaml")
    for example in examples:
        (tmp_path / example).write_bytes((EXAMPLES / example).read_bytes())
    bad = _variant(tmp_path, *VARIANTS["e1-without-needs"][:2])
    before = _listing(tmp_path)
    for example in examples:
        for command in ("check", "plan"):
            assert cli("--output", "json", command, example).rc == 0
    for command in ("check", "plan"):
        assert cli(command, "hello.yaml").rc == 0  # human mode, tables included
        assert cli("--output", "json", command, bad.name).rc == 2
    assert _listing(tmp_path) == before


AND_OR = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: t}
spec:
  tasks:
    - {id: a, uses: "action:p", with: {x: "${{ inputs.a == 1 and inputs.b == 2 }}"}}
    - {id: c, uses: "action:p", when: "${{ inputs.a == 1 or inputs.b == 2 }}"}
    - {id: d, uses: "action:p", when: "inputs.a != 1 AND inputs.b != 2"}
    - id: r
      uses: router
      needs: [a]
      route:
        select: "${{ tasks.a.output.x == true or inputs.b }}"
        cases: [{equals: true, tasks: [e]}]
    - {id: e, uses: "action:p", needs: [r]}
    - {id: l, uses: "action:p", loop: {maxIterations: 3, while: "${{ vars.loopIndex < 2 || inputs.a }}"}}
    - {id: ok, uses: "action:p", when: "inputs.a == 'rock and roll'", with: {y: "${{ inputs.b == \\"x or y\\" }}"}}
  inputs: {a: 1, b: 2}
  actions: {p: {kind: builtin.assign}}
  outputs: {o: "${{ inputs.a == 1 || inputs.b == 2 }}"}
"""


def test_and_or_in_a_condition_are_refused_where_they_are_written(cli: Cli, tmp_path: Path) -> None:
    # spec/dsl.md §6.3: no and/or. They were split into one string literal after the first
    # operator: `inputs.a == 1 or inputs.b == 2` compared inputs.a with "1 or inputs.b == 2".
    (tmp_path / "wf.yaml").write_text(AND_OR, encoding="utf-8")
    lines = AND_OR.splitlines()
    for args in (("check",), ("run", "--db", "db.sqlite")):
        refused = cli("--output", "json", *args, "wf.yaml")
        assert refused.rc == 2, refused.stdout
        found = {d["path"]: d for d in refused.error["diagnostics"]}
        assert sorted(found) == [
            "spec.outputs.o",
            *(f"spec.tasks.{i}.{key}" for i, key in ((0, "with.x"), (1, "when"), (2, "when"))),
            "spec.tasks.3.route.select",
            "spec.tasks.5.loop.while",
        ]
        for diagnostic in found.values():
            assert diagnostic["code"] == "invalid_template"
            assert "`and`, `or`, `&&` and `||` are not supported" in diagnostic["message"]
            assert lines[diagnostic["line"] - 1][diagnostic["column"] - 1] == '"'
    assert _listing(tmp_path) == ["wf.yaml"]


# --------------------------------------------------------------------------- warnings

LEGACY = """\
playbook: legacy
modules:
  greet: { kind: builtin.assign }
tasks:
  - id: a
    uses: module:greet
    with: { message: hi }
"""


def test_commands_compiling_a_file_carry_the_warnings_check_shows(cli: Cli, tmp_path: Path) -> None:
    # A legacy document warns `migration_required` (spec/dsl.md §1); the success envelope's
    # `diagnostics` (spec/cli.md §2) carry it on `run` as on `check`, and human mode prints it.
    (tmp_path / "legacy.yaml").write_text(LEGACY)
    checked = cli("--output", "json", "check", "legacy.yaml")
    assert checked.rc == 0, checked.stderr
    warned = json.loads(checked.stdout)["diagnostics"]
    assert [d["code"] for d in warned] == ["migration_required"]
    ran = cli("--output", "json", "run", "legacy.yaml", "--db", "r.db")
    assert ran.rc == 0, ran.stderr
    assert json.loads(ran.stdout)["diagnostics"] == warned
    human = cli("run", "legacy.yaml", "--db", "r.db")
    assert human.rc == 0 and "warning[migration_required]" in human.stderr
    queued = cli("--output", "json", "submit", "legacy.yaml", "--db", "r.db")
    assert queued.rc == 0, queued.stderr
    assert json.loads(queued.stdout)["diagnostics"] == warned
    source = ran.data["runId"]
    retry = ("retry", "legacy.yaml", source, "--from", "a", "--restart-successful", "--db", "r.db")
    for argv in (
        (*retry, "--plan"),
        ("repair", *retry[1:], "--plan"),
        ("providers", "inspect", "legacy.yaml"),
        ("auth", "check", "legacy.yaml"),
        ("migrate", "legacy.yaml"),
    ):
        done = cli("--output", "json", *argv)
        assert done.rc == 0, done.stderr
        assert json.loads(done.stdout)["diagnostics"] == warned, argv
    # migrate in human mode: the translated document alone on stdout, the warning on stderr.
    printed = cli("migrate", "legacy.yaml")
    assert printed.rc == 0 and "migration_required" in printed.stderr
    assert yaml.safe_load(printed.stdout)["metadata"]["name"] == "legacy"


def test_a_run_failing_mid_drive_carries_the_warnings_on_its_error(
    cli: Cli, tmp_path: Path
) -> None:
    # The error envelope has `diagnostics` too (spec/cli.md §2): a run that fails after the
    # compile warned reports the warning there, not only on success.
    failing = LEGACY.replace("greet: { kind: builtin.assign }", "peek: { kind: builtin.read }")
    failing = failing.replace("module:greet", "module:peek").replace(
        "{ message: hi }", "{ path: missing.txt }"
    )
    (tmp_path / "legacy.yaml").write_text(failing)
    ran = cli("--output", "json", "run", "legacy.yaml", "--db", "r.db")
    assert ran.rc == 4, ran.stderr
    envelope = json.loads(ran.stderr)
    assert envelope["error"]["runId"] and "missing.txt" in envelope["error"]["message"]
    assert [d["code"] for d in envelope["diagnostics"]] == ["migration_required"]
    # So does a retry or repair whose new run fails the same way.
    source = envelope["error"]["runId"]
    for argv in (("retry", "--failed"), ("repair", "--from", "a")):
        redone = cli("--output", "json", argv[0], "legacy.yaml", source, *argv[1:], "--db", "r.db")
        assert redone.rc == 4, redone.stderr
        codes = [d["code"] for d in json.loads(redone.stderr)["diagnostics"]]
        assert codes == ["migration_required"], argv


# The original's getting-started workflow: one assign task named greet.
GETTING_STARTED_HELLO = (
    "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: { name: hello }\nspec:\n"
    "  actions: { assign: { kind: builtin.assign } }\n"
    "  tasks: [ { id: greet, uses: action:assign, with: { message: hi } } ]\n"
)


def test_human_check_prints_the_original_s_one_line(cli: Cli, tmp_path: Path) -> None:
    """The original's getting-started guide shows `check`'s whole human output as
    ``valid: hello (1 tasks)``; scripts match that line."""
    (tmp_path / "wf.yaml").write_text(GETTING_STARTED_HELLO, encoding="utf-8")
    done = cli("check", "wf.yaml", "--color", "never")
    assert done.rc == 0, done.stderr
    assert done.stdout == "valid: hello (1 tasks)\n"


def test_human_plan_names_order_effects_and_predictability(cli: Cli, tmp_path: Path) -> None:
    """The original's getting-started guide: the plan "reports task order `greet`, one
    effect, and `FullyPredictable`"."""
    (tmp_path / "wf.yaml").write_text(GETTING_STARTED_HELLO, encoding="utf-8")
    done = cli("plan", "wf.yaml", "--color", "never")
    assert done.rc == 0, done.stderr
    assert "order greet  effects 1  FullyPredictable\n" in done.stdout
