"""The human views of recovery plans and outcomes: before running a repair or retry, an operator
reads whether it can run, what it reuses and executes, and what blocks it and what to pass
instead; after, which run was made from which source — never the indented JSON record.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import EXAMPLES, Cli


def _source(cli: Cli, tmp_path: Path) -> str:
    shutil.copy(EXAMPLES / "e1-dataflow.yaml", tmp_path / "wf.yaml")
    ran = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert ran.rc == 0, ran.stderr
    return str(ran.data["runId"])


def _rows(text: str) -> dict[str, str]:
    """A plan view's labelled lines (``  roots      gate``) as label → value."""
    found = {}
    for line in text.splitlines():
        if line.startswith("  ") and not line.startswith("    ") and "  " in line.strip():
            label, value = line.strip().split(None, 1)
            found[label] = value.strip()
    return found


def test_a_blocked_repair_plan_names_the_block_and_what_to_pass(cli: Cli, tmp_path: Path) -> None:
    source = _source(cli, tmp_path)
    blocked = cli("repair", "wf.yaml", source, "--from", "gate", "--plan", "--db", "r.db")
    assert blocked.rc == 3, blocked.stderr
    assert blocked.stdout.startswith(f"repair plan for run {source}: blocked\n")
    assert _rows(blocked.stdout)["roots"] == "gate" and _rows(blocked.stdout)["reuse"] == "stash"
    block = blocked.stdout.split("blocked:\n", 1)[1].splitlines()
    assert block[0] == "  gate  successful_root_requires_acknowledgement"
    assert "pass --restart-successful" in block[1]
    again = ("repair", "wf.yaml", source, "--from", "gate", "--restart-successful", "--plan")
    ready = cli(*again, "--db", "r.db")
    assert ready.rc == 0 and ready.stdout.startswith(f"repair plan for run {source}: can run")
    rows = _rows(ready.stdout)
    assert (rows["reuse"], rows["execute"]) == ("stash", "gate") and "blocked:" not in ready.stdout
    assert rows["effects"] == "0; approvals possible: 0"


def test_a_retry_outcome_says_what_it_reused_and_executed(cli: Cli, tmp_path: Path) -> None:
    source = _source(cli, tmp_path)
    args = ("retry", "wf.yaml", source, "--from", "gate", "--restart-successful", "--db", "r.db")
    done = cli(*args)
    assert done.rc == 0, done.stderr
    head, *rest = done.stdout.splitlines()
    assert head.startswith("run run-") and head.endswith(f": succeeded  (from {source})")
    assert rest[:2] == ["  reused     stash", "  executed   gate"]
    assert "\n".join(rest[2:]) == '{\n  "total": 3\n}'


def test_a_compensation_plan_lists_each_inverse_and_the_outcome_what_it_undid(
    cli: Cli, tmp_path: Path
) -> None:
    shutil.copy(EXAMPLES / "e7-compensation.yaml", tmp_path / "wf.yaml")
    failed = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert failed.rc == 4, failed.stderr
    source = failed.error["error"]["runId"]
    listed = cli("--output", "json", "effects", "list", source, "--db", "r.db").data["effects"]
    [made] = [e["effectId"] for e in listed if e["taskId"] == "make"]
    plan = cli("compensate", source, "--plan", "--db", "r.db")
    assert plan.rc == 0, plan.stderr
    assert plan.stdout.splitlines() == [
        f"compensation plan for run {source}: can run",
        "  make ← make--compensate  (action save)",
        f"    undoes effect {made}",
    ]
    done = cli("compensate", source, "--db", "r.db")
    assert done.rc == 0, done.stderr
    head, undone = done.stdout.splitlines()[:2]
    assert head.endswith(f": succeeded  (from {source})") and undone == "  undone     make"
    again = cli("compensate", source, "--plan", "--db", "r.db")
    assert again.stdout.splitlines() == [
        f"compensation plan for run {source}: nothing to run",
        "  already compensated: 1 effect(s)",
    ]


def test_plan_views_print_the_plans_warnings(cli: Cli, tmp_path: Path) -> None:
    # A warning is the only hint a plan gives of work it leaves out: compensating a retry whose
    # mutation was reused from its source is "nothing to run" — the effect is the source's.
    shutil.copy(EXAMPLES / "e7-compensation.yaml", tmp_path / "wf.yaml")
    source = cli("--output", "json", "run", "wf.yaml", "--db", "r.db").error["error"]["runId"]
    retried = cli("--output", "json", "retry", "wf.yaml", source, "--failed", "--db", "r.db")
    retry = retried.error["error"]["runId"]
    plan = cli("compensate", retry, "--plan", "--db", "r.db")
    assert plan.rc == 0, plan.stderr
    assert plan.stdout.splitlines() == [
        f"compensation plan for run {retry}: nothing to run",
        "",
        f"warning: task make was reused by run {retry}; its effects belong to an earlier run "
        "— compensate that run",
    ]
    # A repair that drops a task says its result is not carried over.
    text = (tmp_path / "wf.yaml").read_text()
    (tmp_path / "wf.yaml").write_text(text[: text.index("    - id: verify")])
    args = ("repair", "wf.yaml", source, "--from", "make", "--restart-successful", "--plan")
    repair = cli(*args, "--db", "r.db")
    assert repair.rc == 0, repair.stdout + repair.stderr
    assert repair.stdout.splitlines()[-1] == (
        f"warning: task verify of run {source} is not in the target workflow; its result is "
        "not carried over"
    )


def test_a_block_of_the_whole_plan_reads_as_one(cli: Cli, tmp_path: Path) -> None:
    """A block that names no task (a changed workflow under `retry`) is not printed as an
    indented message line: its rule sits where a task's would, after `-`."""
    run_id = _source(cli, tmp_path)
    wf = tmp_path / "wf.yaml"
    wf.write_text(wf.read_text().replace("count: 3", "count: 4", 1))
    plan = cli("retry", "wf.yaml", run_id, "--failed", "--plan", "--db", "r.db")
    assert plan.rc == 3, plan.stderr
    after = plan.stdout.split("blocked:\n", 1)[1].splitlines()
    assert after[0] == "  -  workflow_digest_mismatch", plan.stdout
    assert after[1].startswith("    the workflow differs from the one run"), plan.stdout


def test_a_new_task_a_repair_runs_is_on_the_execute_line(cli: Cli, tmp_path: Path) -> None:
    """`rerunTasks` holds only executed tasks the source also had; a task new in the target
    that the repair runs must still read as executing, not `execute  -`."""
    run_id = _source(cli, tmp_path)
    wf = tmp_path / "wf.yaml"
    extra = "    - id: extra\n      uses: action:check\n      with: { that: true }\n"
    extra += "    - id: more\n      uses: action:check\n      needs: [extra]\n"
    extra += "      with: { that: true }\n"
    wf.write_text(wf.read_text() + extra)
    args = ("repair", "wf.yaml", run_id, "--from", "extra", "--plan", "--db", "r.db")
    plan = cli(*args)
    assert plan.rc == 0, plan.stdout + plan.stderr
    rows = _rows(plan.stdout)
    assert (rows["reuse"], rows["execute"], rows["new"]) == (
        "stash, gate",
        "extra, more",
        "extra, more",
    )
    data = cli("--output", "json", *args).data
    assert data["rerunTasks"] == [] and data["newTasks"] == ["extra", "more"]
