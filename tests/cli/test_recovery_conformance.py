"""What a script written for the original sees when it recovers a run (spec/cli.md §5, §7).

The CLI runs as a subprocess in a temporary directory, as such a script calls it: a resume that
an unresolved effect refuses names the invocation's trace.
"""

from __future__ import annotations

from pathlib import Path


def _workflow(name: str, command: str, extra: str = "") -> str:
    """One shell step named ``step`` under a policy that runs it without approval."""
    action = f'{{ kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "{command}"]{extra} }}'
    return (
        f"apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\nmetadata: {{ name: {name} }}\n"
        "spec:\n  policy: { approval: never, processAllowlist: [sh] }\n"
        f"  actions: {{ step: {action} }}\n"
        '  tasks: [{ id: step, uses: "action:step" }]\n'
    )


# The process outlives its timeout: the effect is uncertain and the run waits for an operator.
SLOW = _workflow("timed-out", "sleep 5", ", timeoutSeconds: 1")
# The budget cannot hold the process's output limit, so the request is refused before dispatch.
OUTPUT_BUDGET = _workflow("capped", "echo ran >> marker.txt").replace(
    "spec:\n", "spec:\n  runtime: { budgets: { maxProcessOutputBytes: 100 } }\n"
)


def test_a_refused_resume_names_its_own_trace(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "r.db"
    timed_out = cli("--output", "json", "run", str(write_workflow(SLOW)), "--db", str(db))
    assert timed_out.rc == 4, timed_out.stderr
    run_id, first_trace = timed_out.error["error"]["runId"], timed_out.error["error"]["traceId"]
    blocked = cli("--output", "json", "resume", run_id, "--db", str(db))
    assert blocked.rc == 3, blocked.stderr
    error = blocked.error["error"]
    assert error["runId"] == run_id and "unresolved" in error["message"]
    # A new invocation, a new trace: the refusal is correlated by it, like any run's error.
    assert str(error["traceId"]).startswith("trace-") and error["traceId"] != first_trace


def test_a_finished_run_refuses_resume_with_a_trace(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "r.db"
    failed = cli("--output", "json", "run", str(write_workflow(OUTPUT_BUDGET)), "--db", str(db))
    run_id = failed.error["error"]["runId"]
    again = cli("--output", "json", "resume", run_id, "--db", str(db))
    assert again.rc == 4
    assert again.error["error"]["runId"] == run_id
    assert str(again.error["error"]["traceId"]).startswith("trace-")


def test_a_refused_resume_changes_nothing(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Refused for an unresolved effect, a resume takes no lease: the run, its updatedAt, its
    audit trail are as they were, however often it is tried (a crash's started effects
    becoming uncertain is the one change, made by the first)."""
    db = tmp_path / "r.db"
    timed_out = cli("--output", "json", "run", str(write_workflow(SLOW)), "--db", str(db))
    run_id = timed_out.error["error"]["runId"]
    before = cli("--output", "json", "inspect", run_id, "--db", str(db)).data
    for _ in range(2):
        assert cli("--output", "json", "resume", run_id, "--db", str(db)).rc == 3
        after = cli("--output", "json", "inspect", run_id, "--db", str(db)).data
        assert after["run"] == before["run"]  # updatedAt included
        assert after == before
