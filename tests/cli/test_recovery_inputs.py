"""``retry`` and ``repair`` take ``run``'s input flags (spec/cli.md §1: "+ run-style flags").

The new run's inputs are the source run's, with ``--inputs``/``--inputs-file`` and then each
``--input`` laid over them, checked as ``run`` checks them (same messages, exit 2, nothing
created). A task that reads a changed input is not reused: it blocks the plan until it is a
root, and then it executes; a task reading none of the changed inputs is still reused. A bad
``--var``/``--vars-file`` is refused here as a bad input flag is.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Cli

FLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: ins }
spec:
  inputs: { n: 2, word: hi }
  actions:
    put: { kind: builtin.assign }
    check: { kind: builtin.assert }
  outputs: { n: "${{ tasks.count.output.output.n }}", word: "${{ tasks.say.output.output.w }}" }
  tasks:
    - { id: count, uses: "action:put", with: { n: "${{ inputs.n }}" } }
    - { id: say, uses: "action:put", with: { w: "${{ inputs.word }}" } }
    - { id: gate, uses: "action:check", needs: [count, say], with: { that: "${{ tasks.count.output.output.n > 3 }}", message: too small } }
"""

# The failing task reads the input itself, and no other task reads it: a retry of the failed
# task alone can pass with another value.
FAILING = FLOW.replace("tasks.count.output.output.n > 3", "inputs.n > 3").replace(
    '{ n: "${{ inputs.n }}" }', "{ n: 1 }"
)


def _source(cli: Cli, tmp_path: Path, text: str, rc: int) -> str:
    (tmp_path / "wf.yaml").write_text(text)
    ran = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert ran.rc == rc, ran.stderr
    return str(ran.data["runId"] if rc == 0 else ran.error["error"]["runId"])


def _tasks(cli: Cli, run_id: str) -> dict[str, dict[str, object]]:
    got = cli("--output", "json", "inspect", run_id, "--db", "r.db")
    assert got.rc == 0, got.stderr
    assert got.data["run"]["mode"] in ("retry", "repair")
    return {t["taskId"]: t for t in got.data["tasks"]}


def _runs(cli: Cli) -> list[str]:
    listed = cli("--output", "json", "runs", "list", "--db", "r.db")
    assert listed.rc == 0, listed.stderr
    return sorted(r["runId"] for r in listed.data["runs"])


def test_repair_with_a_changed_input_reruns_the_task_reading_it_and_reuses_the_other(
    cli: Cli, tmp_path: Path
) -> None:
    source = _source(cli, tmp_path, FLOW.replace("> 3", "> 1"), 0)
    args = ("repair", "wf.yaml", source, "--from", "count", "--restart-successful")
    done = cli("--output", "json", *args, "--input", "n=4", "--db", "r.db")
    assert done.rc == 0, done.stderr
    assert done.data["output"] == {"n": 4, "word": "hi"}
    assert (done.data["reusedTasks"], done.data["executedTasks"]) == (["say"], ["count", "gate"])
    tasks = _tasks(cli, done.data["runId"])
    assert tasks["count"]["disposition"] == "executed"
    assert tasks["count"]["output"]["output"] == {"n": 4}  # type: ignore[index]
    assert tasks["say"]["disposition"] == "reused" and tasks["say"]["sourceRunId"] == source
    # --inputs-file and --input together: the file's object, then each --input over it.
    (tmp_path / "in.json").write_text('{"n": 5, "word": "yo"}')
    args = ("repair", "wf.yaml", source, "--from", "count", "--from", "say")
    again = cli(
        "--output",
        "json",
        *args,
        "--restart-successful",
        "--inputs-file",
        "in.json",
        "--db",
        "r.db",
    )
    assert again.rc == 0, again.stderr
    assert again.data["output"] == {"n": 5, "word": "yo"}
    more = ("--inputs-file", "in.json", "--input", 'word="x"')
    both = cli("--output", "json", *args, "--restart-successful", *more, "--db", "r.db")
    assert both.data["output"] == {"n": 5, "word": "x"}


def test_retry_failed_with_new_inputs_succeeds(cli: Cli, tmp_path: Path) -> None:
    source = _source(cli, tmp_path, FAILING, 4)
    args = ("retry", "wf.yaml", source, "--failed", "--inputs", '{"n":4}', "--db", "r.db")
    done = cli("--output", "json", *args)
    assert done.rc == 0, done.stderr
    assert (done.data["reusedTasks"], done.data["executedTasks"]) == (["count", "say"], ["gate"])
    tasks = _tasks(cli, done.data["runId"])
    assert tasks["gate"]["state"] == "succeeded" and tasks["gate"]["disposition"] == "executed"
    assert tasks["count"]["disposition"] == "reused"
    # The run's inputs are the source's with --inputs over them; workflow outputs see them.
    shown = cli("--output", "json", "inspect", done.data["runId"], "--db", "r.db")
    assert shown.data["run"]["inputs"] == {"n": 4, "word": "hi"}


BAD = [
    pytest.param(("--input", "zzz=1"), id="unknown-key"),
    pytest.param(("--inputs", "{}", "--inputs-file", "in.json"), id="inputs-and-file"),
    pytest.param(("--input", "n"), id="no-equals"),
    pytest.param(("--inputs", "[4]"), id="not-an-object"),
    # The variable flags too (tests/cli/test_recovery_vars.py): compiled as run compiles them.
    pytest.param(("--var", "tier"), id="var-no-equals"),
    pytest.param(("--var", "tier=gold"), id="var-not-json"),
    pytest.param(("--var", "tier=NaN"), id="var-refused-json"),
    pytest.param(("--vars-file", "missing.yaml"), id="missing-vars-file"),
    pytest.param(("--vars-file", "list.yaml"), id="vars-file-not-a-mapping"),
]


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("command", ["retry", "repair"])
def test_bad_input_and_variable_flags_are_refused_as_run_refuses_them_and_create_nothing(
    cli: Cli, tmp_path: Path, command: str, bad: tuple[str, ...]
) -> None:
    source = _source(cli, tmp_path, FLOW.replace("> 3", "> 1"), 0)
    (tmp_path / "in.json").write_text('{"n": 4}')
    (tmp_path / "list.yaml").write_text("- n\n")
    before = _runs(cli)
    as_run = cli("--output", "json", "run", "wf.yaml", *bad, "--db", "r.db")
    assert as_run.rc == 2, as_run.stderr
    args = (command, "wf.yaml", source, "--from", "count", "--restart-successful", *bad)
    for plan in ((), ("--plan",)):
        refused = cli("--output", "json", *args, *plan, "--db", "r.db")
        assert refused.rc == 2, refused.stderr
        assert refused.error["error"]["message"] == as_run.error["error"]["message"]
    assert _runs(cli) == before
    fresh = cli("--output", "json", *args, "--db", "new.db")
    assert fresh.rc == 2 and not (tmp_path / "new.db").exists()


def test_the_plan_shows_which_inputs_changed_and_what_that_blocks(cli: Cli, tmp_path: Path) -> None:
    source = _source(cli, tmp_path, FLOW.replace("> 3", "> 1"), 0)
    before = _runs(cli)
    asked = ("--from", "gate", "--plan", "--input", "n=4", "--db", "r.db")
    blocked = cli("repair", "wf.yaml", source, *asked)
    assert blocked.rc == 3, blocked.stderr
    assert blocked.stdout.startswith(f"repair plan for run {source}: blocked\n")
    assert "  reuse      say\n" in blocked.stdout
    assert "  count  resolved_input_digest_mismatch\n" in blocked.stdout
    assert "task count reads run input(s) n, which differ" in blocked.stdout
    assert f"warning: the new run's inputs differ from run {source}'s in n;" in blocked.stdout
    args = ("--plan", "--from", "count", "--restart-successful", "--db", "r.db")
    ready = cli("--output", "json", "retry", "wf.yaml", source, *args, "--inputs", '{"n": 4}')
    assert ready.rc == 0, ready.stderr
    plan = ready.data
    assert plan["compatible"] is True and plan["blockedReuse"] == []
    assert (plan["reusedTasks"], plan["rerunTasks"]) == (["say"], ["count", "gate"])
    assert [w for w in plan["warnings"] if "inputs differ" in w] == [
        f"the new run's inputs differ from run {source}'s in n; a task reading one of them "
        "is not reused"
    ]
    # The source's own value is no change: everything stays reusable, and nothing is said.
    same = cli("--output", "json", "repair", "wf.yaml", source, *args, "--input", "n=2")
    assert same.rc == 0 and same.data["reusedTasks"] == ["say"], same.stderr
    assert same.data["warnings"] == []
    assert _runs(cli) == before


def test_an_input_the_target_adds_has_its_default_and_the_sources_values_stay(
    cli: Cli, tmp_path: Path
) -> None:
    """The new run's inputs are the target's ``spec.inputs``, the source run's inputs over
    them, the flags over both: a repair whose workflow adds an input (and a task reading it)
    runs with that input's default, while an input both declare keeps the source's value
    even where the target changed its default."""
    source = _source(cli, tmp_path, FLOW.replace("> 3", "> 1"), 0)
    added = FLOW.replace("> 3", "> 1").replace("{ n: 2, word: hi }", "{ n: 9, word: hi, extra: 7 }")
    added = added.replace(
        "    - { id: gate,",
        '    - { id: more, uses: "action:put", with: { e: "${{ inputs.extra }}" } }\n    - { id: gate,',
    )
    (tmp_path / "wf.yaml").write_text(added)
    args = ("repair", "wf.yaml", source, "--from", "more", "--db", "r.db")
    done = cli("--output", "json", *args)
    assert done.rc == 0, done.stderr
    assert done.data["executedTasks"] == ["more"]
    tasks = _tasks(cli, done.data["runId"])
    assert tasks["more"]["output"]["output"] == {"e": 7}  # type: ignore[index]
    assert tasks["count"]["disposition"] == "reused"  # n stays 2, the source's value
    assert done.data["output"]["n"] == 2
    flagged = cli("--output", "json", *args, "--input", "extra=8")
    assert flagged.rc == 0, flagged.stderr
    assert _tasks(cli, flagged.data["runId"])["more"]["output"]["output"] == {"e": 8}  # type: ignore[index]


MEMORY_FLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: mem }
spec:
  inputs: { v: 1 }
  memory: { working: { a: 0, b: 5 } }
  actions:
    remember: { kind: builtin.memory.write }
    read: { kind: builtin.memory.read }
    put: { kind: builtin.assign }
  tasks:
    - { id: w, uses: "action:remember", with: { key: a, value: "${{ inputs.v }}" } }
    - { id: seen, uses: "action:put", with: { a: "${{ memory.a }}" } }
    - { id: got, uses: "action:read", with: { key: a } }
    - { id: other, uses: "action:put", with: { b: "${{ memory.b }}" } }
"""


@pytest.mark.parametrize(
    ("change", "flags"),
    [("input", ("--input", "v=7")), ("definition", ())],
    ids=["changed-input", "changed-writer"],
)
def test_a_task_reading_memory_an_executed_task_wrote_is_not_reused(
    cli: Cli, tmp_path: Path, change: str, flags: tuple[str, ...]
) -> None:
    """``seen`` and ``got`` read key ``a`` after ``w`` wrote it, with no ``needs`` on ``w``:
    re-executing ``w`` (new input, or a new value in the target) may change what they read,
    so their recorded outputs block (``resolved_input_digest_mismatch``, naming ``w``) until
    they are roots too; ``other`` reads a key nothing executed wrote and stays reused."""
    source = _source(cli, tmp_path, MEMORY_FLOW, 0)
    if change == "definition":
        (tmp_path / "wf.yaml").write_text(MEMORY_FLOW.replace('"${{ inputs.v }}"', "7"))
    runs = _runs(cli)
    base = ("wf.yaml", source, "--from", "w", "--restart-successful", *flags, "--db", "r.db")
    modes = [("repair", base)] + ([("retry", base)] if change == "input" else [])
    for mode, args in modes:
        plan = cli("--output", "json", mode, *args)
        assert plan.rc == 3, plan.stderr
        blocked = {b["taskId"]: b for b in plan.data["blockedReuse"]}
        assert sorted(blocked) == ["got", "seen"]
        for task_id, block in blocked.items():
            assert block["rule"] == "resolved_input_digest_mismatch"
            assert block["suggestedRepairRoots"] == [task_id]
            assert "working memory a as task(s) w wrote it" in block["message"]
        assert plan.data["reusedTasks"] == ["other"]
    assert _runs(cli) == runs  # a blocked plan creates nothing
    roots = ("--from", "seen", "--from", "got")
    done = cli("--output", "json", "repair", *base[:-2], *roots, "--db", "r.db")
    assert done.rc == 0, done.stderr
    assert done.data["reusedTasks"] == ["other"]
    tasks = _tasks(cli, done.data["runId"])
    assert tasks["seen"]["output"]["output"] == {"a": 7}  # type: ignore[index]
    assert tasks["got"]["output"]["value"] == 7  # type: ignore[index]
