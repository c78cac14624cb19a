"""Every audit row names the trace of the invocation that wrote it (spec/cli.md §1: every
invocation mints a trace; docs/operations.md §12: "each row carries the trace of the invocation
that wrote it").

Each test runs real commands one after another on one ledger and reads the audit log after
each: the rows a command added are exactly the rows past the log's end before it (nothing else
writes meanwhile). A command whose envelope names its trace (``RunOutcome``, an error envelope,
``EffectReconciliation``) must have written its rows under that trace; one whose envelope has
none (``ApprovalResolution``, ``Cancellation``, ``serve``'s report) must have written them all
under one trace of its own, new to the run.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tests.conftest import EXAMPLES, Cli

# One fast shell step: a crash right after its effect is ``started`` leaves it in flight.
ECHO = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: echo }
spec:
  policy: { approval: never, processAllowlist: [sh] }
  actions: { step: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo hi"] } }
  tasks: [{ id: step, uses: "action:step" }]
"""


class AuditLog:
    """A run's audit log as the commands of a test extend it."""

    def __init__(self, cli: Cli, run_id: str) -> None:
        self.cli, self.run_id, self.seen = cli, run_id, 0
        self.traces: list[str] = []  # each command's trace, in order

    def added(self) -> list[dict[str, Any]]:
        """The rows written since the last call."""
        shown = self.cli("--output", "json", "inspect", self.run_id, "--db", "r.db")
        assert shown.rc == 0, shown.stderr
        rows: list[dict[str, Any]] = [r for r in shown.data["audit"] if r["sequence"] > self.seen]
        assert rows, "the command wrote no audit row"
        self.seen = rows[-1]["sequence"]
        return rows

    def written_by(self, trace: str) -> None:
        """Every row written since the last call names ``trace`` (the command's own)."""
        self._check(self.added(), trace)

    def written_under_one_new_trace(self) -> list[str]:
        """Every row written since the last call names one trace no earlier command used; the
        rows' event types."""
        rows = self.added()
        traces = {r["traceId"] for r in rows}
        assert len(traces) == 1, [(r["eventType"], r["traceId"]) for r in rows]
        [trace] = traces
        assert isinstance(trace, str) and trace.startswith("trace-")
        self._check(rows, trace)
        return [r["eventType"] for r in rows]

    def _check(self, rows: list[dict[str, Any]], trace: str) -> None:
        shown = [(r["eventType"], r["traceId"]) for r in rows]
        assert shown == [(kind, trace) for kind, _trace in shown]
        assert trace not in self.traces, "a command's trace is its own"
        self.traces.append(trace)


def _paused_e6(cli: Cli, tmp_path: Path) -> tuple[AuditLog, str]:
    """A paused run of the approval example whose rows all name its trace; its approval."""
    shutil.copy(EXAMPLES / "e6-approval.yaml", tmp_path / "e6.yaml")
    paused = cli("--output", "json", "run", "e6.yaml", "--db", "r.db")
    assert paused.rc == 3, paused.stderr
    log = AuditLog(cli, paused.data["runId"])
    log.written_by(paused.data["traceId"])
    shown = cli("--output", "json", "inspect", log.run_id, "--db", "r.db").data
    return log, str(shown["approvals"][0]["approvalId"])


def test_run_approve_resume_each_audit_under_their_own_trace(cli: Cli, tmp_path: Path) -> None:
    log, approval = _paused_e6(cli, tmp_path)
    approved = cli(
        "--output", "json", "approvals", "approve", approval, "--db", "r.db", "--reason", "ok"
    )
    assert approved.rc == 0, approved.stderr
    kinds = log.written_under_one_new_trace()
    assert kinds == ["approval.approved", "effect.requested"]  # the decision, then its effect
    resumed = cli("--output", "json", "resume", log.run_id, "--db", "r.db")
    assert resumed.rc == 0, resumed.stderr
    log.written_by(resumed.data["traceId"])  # run.running, effect.started, budget.reserved, …
    # The effect's own record keeps the trace of the run that requested it (its traceparent).
    shown = cli("--output", "json", "inspect", log.run_id, "--db", "r.db").data
    assert [e["traceId"] for e in shown["effects"]] == [log.traces[0]]
    # `inspect`'s traces: the run's history by invocation, each one's rows and their span.
    rows = shown["audit"]
    assert [t["traceId"] for t in shown["traces"]] == log.traces
    for trace in shown["traces"]:
        own = [r for r in rows if r["traceId"] == trace["traceId"]]
        assert trace["events"] == len(own)
        assert (trace["firstSequence"], trace["lastSequence"]) == (
            own[0]["sequence"],
            own[-1]["sequence"],
        )
        assert (trace["startedAt"], trace["endedAt"]) == (own[0]["createdAt"], own[-1]["createdAt"])


def test_a_cancel_audits_under_its_own_trace(cli: Cli, tmp_path: Path) -> None:
    log, _approval = _paused_e6(cli, tmp_path)
    cancelled = cli("--output", "json", "cancel", log.run_id, "--db", "r.db")
    assert cancelled.rc == 0, cancelled.stderr
    assert log.written_under_one_new_trace() == ["run.cancellation_requested"]
    resumed = cli("--output", "json", "resume", log.run_id, "--db", "r.db")
    assert resumed.rc == 130, resumed.stderr
    kinds = log.written_under_one_new_trace()  # the resume that honoured it: its own trace
    assert {"effect.cancelled", "approval.cancelled", "task.cancelled", "run.cancelled"} <= set(
        kinds
    )


def test_a_refused_cancel_names_the_run_and_its_own_trace(cli: Cli, tmp_path: Path) -> None:
    """An ended run cannot be cancelled (exit 5); the error correlates as resume's do: the
    run's id and the invocation's trace. An unknown run names neither."""
    (tmp_path / "wf.yaml").write_text(ECHO, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert done.rc == 0, done.stderr
    refused = cli("--output", "json", "cancel", done.data["runId"], "--db", "r.db")
    assert refused.rc == 5, refused.stderr
    error = refused.error["error"]
    assert error["runId"] == done.data["runId"]
    assert str(error["traceId"]).startswith("trace-") and error["traceId"] != done.data["traceId"]
    unknown = cli("--output", "json", "cancel", "run-nosuch", "--db", "r.db")
    assert unknown.rc == 5, unknown.stderr
    assert unknown.error["error"]["runId"] is None and unknown.error["error"]["traceId"] is None


def test_resume_and_reconcile_of_an_uncertain_effect_audit_under_their_own_traces(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "wf.yaml").write_text(ECHO, encoding="utf-8")
    crash = {"AGENTCTL_CRASH_AT": "coordinator.after_started", "AGENTCTL_CRASH_HIT": "1"}
    killed = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", env=crash)
    assert killed.rc == -9, killed.stderr
    run = cli("--output", "json", "runs", "list", "--db", "r.db").data["runs"][0]
    log = AuditLog(cli, run["runId"])
    log.written_by(
        cli("--output", "json", "inspect", log.run_id, "--db", "r.db").data["run"]["traceId"]
    )
    # The resume finds the started effect uncertain (its row) and refuses to go on.
    refused = cli("--output", "json", "resume", log.run_id, "--db", "r.db")
    assert refused.rc == 3, refused.stderr
    log.written_by(refused.error["error"]["traceId"])
    effect = cli("--output", "json", "effects", "list", log.run_id, "--db", "r.db").data["effects"][
        0
    ]
    assert effect["status"] == "uncertain"
    (tmp_path / "result.json").write_text('{"exitCode": 0, "stdout": "hi\\n", "stderr": ""}')
    reconcile = ("effects", "reconcile", effect["effectId"], "--status", "applied")
    why = ("--reason", "it printed", "--result-file", "result.json")
    reconciled = cli("--output", "json", *reconcile, *why, "--db", "r.db")
    assert reconciled.rc == 0, reconciled.stderr
    log.written_by(reconciled.data["traceId"])
    resumed = cli("--output", "json", "resume", log.run_id, "--db", "r.db")
    assert resumed.rc == 0, resumed.stderr
    log.written_by(resumed.data["traceId"])


def test_a_serve_audits_its_claim_and_drive_under_one_trace(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(ECHO, encoding="utf-8")
    queued = cli("--output", "json", "submit", "wf.yaml", "--db", "r.db")
    assert queued.rc == 0, queued.stderr
    log = AuditLog(cli, queued.data["runId"])
    log.written_by(queued.data["traceId"])
    serve = ("serve", "--db", "r.db", "--exit-when-idle", "--poll-seconds", "0.2")
    served = cli("--output", "json", *serve)
    assert served.rc == 0, served.stderr
    kinds = log.written_under_one_new_trace()
    assert kinds[:2] == ["run.claimed", "run.running"] and kinds[-1] == "run.succeeded"
