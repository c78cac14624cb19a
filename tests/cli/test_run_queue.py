"""The run queue, black-box: ``submit`` queues, ``serve`` processes claim, drive, take over.

Acceptance of issue 17 (run queue, takeover, fencing), with real ``serve`` processes sharing
one ledger: three of them share 300 queued runs and one is SIGKILLed mid-run; a SIGSTOPped
one whose lease is taken over commits nothing once continued. Marker files count every
executed effect; the ledger's rows and audit say who drove what, under which token.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
import pytest

from agentctl.coordinator.clock import Clock
from tests.cli.queue_helpers import (
    MARKER_WORKFLOW,
    TASKS,
    Query,
    ledger_query,
    markers,
    no_writer_stopped_mid_transaction,
    serve_report,
    wait_for,
)
from tests.clibackend import LedgerTarget
from tests.conftest import Cli, StartCli

LEASE = ("--lease-seconds", "2", "--poll-seconds", "0.2")
SERVE = ("--output", "json", "serve", "--db", "db.sqlite", "--exit-when-idle", *LEASE)
# Seconds a slow run's first effect sleeps: the kill below lands inside it, whatever the load.
SLOW_PAUSE = "2"


def _setup(tmp_path: Path, target: LedgerTarget) -> Query:
    (tmp_path / "wf.yaml").write_text(MARKER_WORKFLOW, encoding="utf-8")
    (tmp_path / "markers").mkdir()
    return ledger_query(target, tmp_path / "db.sqlite")


def _submit_many(
    tmp_path: Path,
    target: LedgerTarget,
    tags: list[str],
    monkeypatch: pytest.MonkeyPatch,
    slow: frozenset[str] = frozenset(),
) -> dict[str, str]:
    """Queue one run per tag through the same code path as ``agentctl submit`` (in this
    process: 300 CLI start-ups would dominate the test); returns ``run id → tag``. The runs
    of ``slow`` tags pause ``SLOW_PAUSE`` seconds in task a's effect."""
    from agentctl.cli_commands import RunRequest, prepare_run
    from agentctl.coordinator import api

    # The backend's --db value for the file the CLI commands name (absolute: in this process).
    how = target.invocation(["--db", str(tmp_path / "db.sqlite")], tmp_path)
    for name, value in how.env.items():
        if name.startswith("AGENTCTL_"):
            monkeypatch.setenv(name, value)
    prepared = prepare_run(RunRequest(tmp_path / "wf.yaml", how.args[1]))
    document, plan, inputs = prepared.document, prepared.plan, prepared.inputs
    runs = {}
    for tag in tags:
        data = api.submit_run(
            document=document,
            plan=plan,
            inputs={**inputs, "tag": tag, "pause": SLOW_PAUSE if tag in slow else "0"},
            db=how.args[1],
            workspace=str(tmp_path),
        )
        runs[str(data["runId"])] = tag
    return runs


def _submit_one(cli: Cli, tag: str) -> str:
    """``agentctl submit`` of the marker workflow; the queued run's id."""
    got = cli("--output", "json", "submit", "wf.yaml", "--db", "db.sqlite", "--input", f"tag={tag}")
    assert got.rc == 0, got.stderr
    return str(got.data["runId"])


def _states(query: Query) -> Counter[str]:
    return Counter(str(r[0]) for r in query("SELECT state FROM runs", ()))


def _reconcile_from_markers(cli: Cli, tmp_path: Path, query: Query, tags: dict[str, str]) -> int:
    """Reconcile every uncertain effect by what its marker file shows; returns how many."""
    found = markers(tmp_path)
    result = tmp_path / "result.json"
    result.write_text('{"exitCode": 0, "stdout": "", "stderr": ""}', encoding="utf-8")
    rows = query(
        "SELECT effect_id, run_id, task_id FROM effects WHERE status = 'uncertain'"
        " AND effect_id NOT IN (SELECT effect_id FROM effect_reconciliations)",
        (),
    )
    for effect_id, run_id, task_id in rows:
        tag = tags[run_id]
        done = f"{tag} {task_id}" in found.get(tag, [])
        status = "applied" if done else "not-applied"
        args = ["effects", "reconcile", effect_id, "--status", status, "--reason", "marker"]
        if done:  # what the command returned: it printed nothing and exited 0
            args += ["--result-file", str(result)]
        got = cli("--output", "json", *args, "--db", "db.sqlite")
        assert got.rc == 0, got.stderr
    return len(rows)


def test_submit_queues_a_run_that_serve_drives(
    cli: Cli, start_cli: StartCli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    query = _setup(tmp_path, ledger_target)
    got = cli("--output", "json", "submit", "wf.yaml", "--db", "db.sqlite", "--input", "tag=q1")
    assert got.rc == 0, got.stderr
    run_id = got.data["runId"]
    assert got.data["state"] == "queued" and not markers(tmp_path)  # nothing executed
    assert query("SELECT state FROM runs WHERE queued_at IS NOT NULL", ()) == [("queued",)]
    # `run` never claims a queued run, and a bad submission creates nothing.
    bad = cli("--output", "json", "submit", "wf.yaml", "--db", "db.sqlite", "--input", "nope=1")
    assert bad.rc == 2 and len(query("SELECT run_id FROM runs", ())) == 1
    report = serve_report(start_cli(*SERVE))
    assert [(r["runId"], r["state"]) for r in report["runs"]] == [(run_id, "succeeded")]
    assert markers(tmp_path) == {"q1": ["q1 a", "q1 b", "q1 c"]}
    registries = list(tmp_path.rglob("*.workers/*.json"))
    assert registries == []  # the serve's worker registry went with its workers, as run's does
    shown = cli("--output", "json", "inspect", run_id, "--db", "db.sqlite")
    assert shown.rc == 0 and shown.data["run"]["state"] == "succeeded", shown.stdout


def test_cancel_of_a_queued_run_cancels_it_at_once(
    cli: Cli, start_cli: StartCli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    query = _setup(tmp_path, ledger_target)
    run_id = _submit_one(cli, "x")
    done = cli("--output", "json", "cancel", run_id, "--db", "db.sqlite")
    assert done.rc == 0, done.stderr
    assert _states(query) == {"cancelled": 1}
    once = ("--output", "json", "serve", "--db", "db.sqlite", "--once", *LEASE)
    report = serve_report(start_cli(*once))  # one claim round: nothing to claim, so it exits
    assert report["stoppedBy"] == "once"
    assert report["runs"] == [] and not markers(tmp_path)


def test_resume_of_a_queued_run_is_refused_and_serve_drives_it(
    cli: Cli, start_cli: StartCli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    _setup(tmp_path, ledger_target)
    run_id = _submit_one(cli, "r")
    refused = cli("resume", run_id, "--db", "db.sqlite")
    # The suggested serve names the queue's database (the CLI adds this invocation's --db).
    waits = "waits for an `agentctl serve --db "
    assert refused.rc == 4 and waits in refused.stderr, refused.stderr
    assert not markers(tmp_path)  # resume drove nothing
    report = serve_report(start_cli(*SERVE))
    assert [(r["runId"], r["state"]) for r in report["runs"]] == [(run_id, "succeeded")]
    assert markers(tmp_path) == {"r": ["r a", "r b", "r c"]}


def test_a_run_cancelled_while_its_dead_serve_held_it_is_claimed_and_starts_nothing(
    cli: Cli, start_cli: StartCli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    query = _setup(tmp_path, ledger_target)
    run_id = _submit_one(cli, "d")
    # A serve claimed it and died before starting anything: its lease has expired.
    query(
        "UPDATE runs SET state = 'running', owner_pid = 999999, lease_holder = 'gone:999999',"
        " lease_expires_at = '2000-01-01T00:00:00.000000Z', lease_token = 1 WHERE run_id = ?",
        (run_id,),
    )
    done = cli("--output", "json", "cancel", run_id, "--db", "db.sqlite")
    assert done.rc == 0, done.stderr
    report = serve_report(start_cli(*SERVE))  # the takeover finds the flag before any batch
    assert [(r["runId"], r["state"]) for r in report["runs"]] == [(run_id, "cancelled")]
    assert not markers(tmp_path)


def test_a_cancelled_run_whose_dead_serve_left_an_effect_started_is_cancelled_by_the_claim(
    cli: Cli, start_cli: StartCli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    query = _setup(tmp_path, ledger_target)
    argv = ("--output", "json", "submit", "wf.yaml", "--db", "db.sqlite")
    run_id = cli(*argv, "--input", "tag=k", "--input", "pause=1.5").data["runId"]
    holder = start_cli(*SERVE)
    _stop_while_effect_a_executes(query, holder, ledger_target, tmp_path / "db.sqlite")
    assert cli("--output", "json", "cancel", run_id, "--db", "db.sqlite").rc == 0  # flag only
    os.kill(holder.pid, signal.SIGKILL)  # it dies holding the run, its effect started
    holder.wait()
    report = serve_report(start_cli(*SERVE))  # claimed once the lease expires
    [claimed] = report["runs"]
    assert (claimed["runId"], claimed["state"], claimed["takeover"]) == (run_id, "cancelled", True)
    assert _states(query) == {"cancelled": 1}
    assert query("SELECT task_id, status FROM effects", ()) == [("a", "uncertain")]
    assert query("SELECT state FROM task_states WHERE task_id = 'b'", ()) == [("cancelled",)]


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--lease-seconds", "nan"),
        ("--lease-seconds", "inf"),
        ("--poll-seconds", "nan"),
        ("--poll-seconds", "1e9"),
        ("--max-runs", "0"),
        ("--max-runs", "1025"),
    ],
)
def test_serve_refuses_a_lease_poll_or_run_count_that_is_not_sane(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path, flag: str, value: str
) -> None:
    _setup(tmp_path, ledger_target)
    cli("submit", "wf.yaml", "--db", "db.sqlite", "--input", "tag=n")
    got = cli("serve", "--db", "db.sqlite", "--once", *LEASE, flag, value)
    assert got.rc == 2 and flag in got.stderr, got.stderr
    assert not markers(tmp_path)


def _kill_mid_run(query: Query, victim: subprocess.Popen[str], slow: set[str]) -> None:
    """SIGKILL ``victim`` once 30 runs succeeded, while it drives one of the ``slow`` runs
    whose first effect has started: that effect sleeps seconds, so the run is surely still
    held when the signal lands (a fast run could end, and its serve idle until its next
    claim, between this read and the kill — then nothing would be taken over)."""

    def victim_mid_run() -> bool:
        holder = f"%:{victim.pid}"
        rows = query(
            "SELECT run_id FROM runs WHERE lease_holder LIKE ? AND state = 'running'"
            " AND EXISTS (SELECT 1 FROM effects e WHERE e.run_id = runs.run_id"
            " AND e.task_id = 'a' AND e.status = 'started')",
            (holder,),
        )
        finished = _states(query)["succeeded"]
        return bool({str(r[0]) for r in rows} & slow) and finished >= 30

    wait_for(victim_mid_run, what="the first serve to be mid-run")
    victim.send_signal(signal.SIGKILL)
    victim.wait()


def _assert_each_run_succeeded_under_one_serve(
    query: Query,
    victim_pid: int,
    reports: list[dict[str, Any]],
    final: dict[str, Any],
    tags: dict[str, str],
) -> None:
    """``reports``: the serves that outlived the victim; ``final``: the serve started after."""
    lost = {r["runId"] for rep in reports for r in rep["runs"] if r["state"] == "lost"}
    claims = _assert_one_driver_at_a_time(query, victim_pid, lost)
    # Each run succeeded under exactly one serve: the killed one (its last claim, no report)
    # or one of the others (their reports).
    reported = Counter(
        r["runId"] for rep in [*reports, final] for r in rep["runs"] if r["state"] == "succeeded"
    )
    by_victim = {r for r, seq in claims.items() if seq[-1][1].endswith(f":{victim_pid}")}
    assert set(reported.values()) == {1} and not set(reported) & by_victim
    assert set(reported) | by_victim == set(tags)


def test_three_serves_share_300_runs_and_take_over_a_killed_ones(
    cli: Cli,
    start_cli: StartCli,
    ledger_target: LedgerTarget,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    query = _setup(tmp_path, ledger_target)
    names = [f"r{i:03d}" for i in range(300)]
    slow_tags = frozenset(names[5::10])  # one run in ten: the victim surely drives some
    tags = _submit_many(tmp_path, ledger_target, names, monkeypatch, slow_tags)
    serves = [start_cli(*SERVE, "--max-runs", "3") for _ in range(3)]
    victim = serves[0]
    _kill_mid_run(query, victim, {run_id for run_id, tag in tags.items() if tag in slow_tags})
    reports = [serve_report(s) for s in serves[1:]]
    # Runs the killed serve had started either continued elsewhere or wait, blocked by an
    # effect whose outcome died with it: reconciled from the marker files, then driven.
    reconciled = _reconcile_from_markers(cli, tmp_path, query, tags)
    final = serve_report(start_cli(*SERVE))
    assert _states(query) == {"succeeded": 300}
    # Every confirmed effect executed exactly once: one marker line per task of every run.
    found = markers(tmp_path)
    assert sorted(found) == sorted(tags.values())
    for tag, lines in found.items():
        assert lines == [f"{tag} {t}" for t in TASKS], (tag, lines)
    _assert_each_run_succeeded_under_one_serve(query, victim.pid, reports, final, tags)
    taken_over = query(
        "SELECT COUNT(*) FROM audit_events WHERE event_type = 'run.claimed'"
        " AND payload_json LIKE ?",
        ('%"takeover":true%',),
    )[0][0]
    assert taken_over >= 1 and reconciled <= taken_over


def _assert_one_driver_at_a_time(
    query: Query, victim_pid: int, lost: set[str]
) -> dict[str, list[tuple[int, str]]]:
    """Each run's claims carry rising tokens; a run was claimed again only after the killed
    serve held it, or after its holder was fenced out (``lost``: a lease that expired while
    its serve was slow, taken over — the fence made that safe)."""
    claims: dict[str, list[tuple[int, str]]] = {}
    for run_id, payload in query(
        "SELECT run_id, payload_json FROM audit_events WHERE event_type = 'run.claimed'"
        " ORDER BY run_id, sequence",
        (),
    ):
        data = json.loads(payload)
        claims.setdefault(run_id, []).append((int(data["token"]), str(data["holder"])))
    assert len(claims) == 300
    again = {run_id: seq for run_id, seq in claims.items() if len(seq) > 1}
    for run_id, seq in claims.items():
        tokens = [t for t, _h in seq]
        assert tokens == sorted(set(tokens)), (run_id, seq)
    for run_id, seq in again.items():
        assert seq[0][1].endswith(f":{victim_pid}") or run_id in lost, (run_id, seq)
    assert any(seq[0][1].endswith(f":{victim_pid}") for seq in again.values()), again
    return claims


def _cmdline(process: psutil.Process) -> list[str]:
    """A child's command line; none once it has ended (a zombie not yet reaped, or gone)."""
    try:
        return process.cmdline()
    except psutil.Error:  # ZombieProcess, NoSuchProcess: it was listed a moment before
        return []


def _stop_while_effect_a_executes(
    query: Query, serve: subprocess.Popen[str], target: LedgerTarget, db: Path
) -> None:
    """SIGSTOP ``serve`` while task a's effect runs in its worker, between transactions."""

    def effect_a_executing() -> bool:
        """Task a's effect is started and its command runs in a worker (its `sleep`)."""
        tree = psutil.Process(serve.pid).children(recursive=True)
        sleeping = any("sleep" in " ".join(_cmdline(p)) for p in tree)
        started = query("SELECT status FROM effects WHERE task_id = 'a'", ()) == [("started",)]
        return sleeping and started

    wait_for(effect_a_executing, what="task a's effect to run in a worker")
    while True:  # stopped between transactions: no lock of it keeps the taker waiting
        os.kill(serve.pid, signal.SIGSTOP)
        if no_writer_stopped_mid_transaction(target, db):
            break
        os.kill(serve.pid, signal.SIGCONT)


def test_a_stopped_serve_whose_lease_was_taken_over_commits_nothing(
    cli: Cli, start_cli: StartCli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    query = _setup(tmp_path, ledger_target)
    got = cli(
        "--output",
        "json",
        "submit",
        "wf.yaml",
        "--db",
        "db.sqlite",
        "--input",
        "tag=s",
        "--input",
        "pause=1.5",
    )
    run_id = got.data["runId"]
    stopped = start_cli(*SERVE)
    _stop_while_effect_a_executes(query, stopped, ledger_target, tmp_path / "db.sqlite")
    taker = serve_report(start_cli(*SERVE))
    # The taker claimed the run (token 2): the started effect became uncertain, so the run
    # waits for reconciliation, released — and the taker's report says so.
    [blocked] = taker["runs"]
    assert (blocked["runId"], blocked["token"], blocked["takeover"]) == (run_id, 2, True)
    assert blocked["state"] == "blocked" and "reconcil" in blocked["error"]
    assert taker["counts"] == {"blocked": 1}
    assert query("SELECT lease_token FROM runs", ()) == [(2,)]
    wait_for(lambda: markers(tmp_path) == {"s": ["s a"]}, what="the worker's effect")
    before = query("SELECT COUNT(*) FROM audit_events", ())
    os.kill(stopped.pid, signal.SIGCONT)
    report = serve_report(stopped)
    assert [(r["runId"], r["state"]) for r in report["runs"]] == [(run_id, "lost")]
    # It committed nothing: no audit row, the effect stays uncertain, task b never started.
    assert query("SELECT COUNT(*) FROM audit_events", ()) == before
    assert query("SELECT task_id, status FROM effects", ()) == [("a", "uncertain")]
    assert markers(tmp_path) == {"s": ["s a"]}
    # Reconciled (the marker shows it happened), the run continues without repeating it.
    assert _reconcile_from_markers(cli, tmp_path, query, {run_id: "s"}) == 1
    serve_report(start_cli(*SERVE))
    assert _states(query) == {"succeeded": 1}
    assert markers(tmp_path) == {"s": ["s a", "s b", "s c"]}


def test_reconciling_an_effect_of_a_stalled_serve_fences_it_out(
    cli: Cli, start_cli: StartCli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    """An operator judges the effect of a serve that is stalled, not dead (its lease
    expired): the reconciliation raises the fencing token, so the serve, woken, commits
    nothing — it used to record the effect succeeded beside the verdict not_applied."""
    query = _setup(tmp_path, ledger_target)
    args = ("--db", "db.sqlite", "--input", "tag=s", "--input", "pause=1.5")
    run_id = cli("--output", "json", "submit", "wf.yaml", *args).data["runId"]
    stopped = start_cli(*SERVE)
    _stop_while_effect_a_executes(query, stopped, ledger_target, tmp_path / "db.sqlite")
    expired = "SELECT COUNT(*) FROM runs WHERE lease_expires_at < ?"
    wait_for(lambda: query(expired, (Clock().now(),)) == [(1,)], what="the lease to expire")
    [(effect_id,)] = query("SELECT effect_id FROM effects WHERE task_id = 'a'", ())
    why = ("--status", "not-applied", "--reason", "its serve looks dead")
    judged = cli("effects", "reconcile", effect_id, *why, "--db", "db.sqlite")
    assert judged.rc == 0, judged.stderr
    os.kill(stopped.pid, signal.SIGCONT)
    report = serve_report(stopped)
    # Fenced out, it recorded nothing of its drive: the effect judged not applied never
    # became succeeded. (Idle again, it may claim the run anew and carry it on: a new attempt.)
    assert (report["runs"][0]["runId"], report["runs"][0]["state"]) == (run_id, "lost")
    status = "SELECT status FROM effects WHERE effect_id = ?"
    assert query(status, (effect_id,)) != [("succeeded",)]


def test_sigterm_hands_the_runs_back_and_another_serve_finishes_them(
    cli: Cli, start_cli: StartCli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    query = _setup(tmp_path, ledger_target)
    (tmp_path / "markers" / "g.hold").touch()  # task a's effect waits while this exists
    got = cli("--output", "json", "submit", "wf.yaml", "--db", "db.sqlite", "--input", "tag=g")
    run_id = got.data["runId"]
    serving = start_cli(*SERVE)
    wait_for(
        lambda: query("SELECT status FROM effects WHERE task_id = 'a'", ()) == [("started",)],
        what="task a's effect to start",
    )
    serving.send_signal(signal.SIGTERM)
    report = serve_report(serving)
    (tmp_path / "markers" / "g.hold").unlink()
    assert report["stoppedBy"] == "SIGTERM"
    assert [(r["runId"], r["state"]) for r in report["runs"]] == [(run_id, "released")]
    # The run stays queued work: running, its lease released; the cut effect is uncertain.
    assert query("SELECT state, owner_pid FROM runs", ()) == [("running", None)]
    assert query("SELECT status FROM effects", ()) == [("uncertain",)]
    assert _reconcile_from_markers(cli, tmp_path, query, {run_id: "g"}) == 1  # not applied
    finished = serve_report(start_cli(*SERVE))
    assert [(r["runId"], r["state"]) for r in finished["runs"]] == [(run_id, "succeeded")]
    assert markers(tmp_path) == {"g": ["g a", "g b", "g c"]}


def test_a_paused_run_waits_for_its_approval_then_any_serve_continues_it(
    cli: Cli, start_cli: StartCli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    query = _setup(tmp_path, ledger_target)
    (tmp_path / "wf.yaml").write_text(
        MARKER_WORKFLOW.replace("approval: never", "approval: high_risk"), encoding="utf-8"
    )
    got = cli("--output", "json", "submit", "wf.yaml", "--db", "db.sqlite", "--input", "tag=p")
    run_id = got.data["runId"]
    first = serve_report(start_cli(*SERVE))
    assert [(r["runId"], r["state"]) for r in first["runs"]] == [(run_id, "paused")]
    assert query("SELECT state, owner_pid FROM runs", ()) == [("paused", None)]
    # Not claimable while its approval is pending: a serve finds nothing to do.
    assert serve_report(start_cli(*SERVE))["runs"] == []
    for _ in TASKS:  # each shell effect is high risk: approve it, let a serve go on
        pending = cli("--output", "json", "approvals", "list", run_id, "--db", "db.sqlite")
        (approval,) = pending.data["approvals"]
        args = ("approvals", "approve", approval["approvalId"], "--reason", "ok")
        assert cli("--output", "json", *args, "--db", "db.sqlite").rc == 0
        report = serve_report(start_cli(*SERVE))
        assert [r["runId"] for r in report["runs"]] == [run_id]
    assert report["runs"][0]["state"] == "succeeded"
    assert markers(tmp_path) == {"p": ["p a", "p b", "p c"]}


AUTO_COMPENSATED = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: auto-compensated }
spec:
  policy: { approval: never, processAllowlist: [sh] }
  compensation: { onFailure: automatic }
  actions:
    make: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo $0 >> marker.txt", "made"] }
    undo1: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo undo1 >> marker.txt"] }
    undo2: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo undo2 >> marker.txt"] }
    check: { kind: builtin.assert }
  tasks:
    - { id: m1, uses: "action:make", compensate: { uses: "action:undo1" } }
    - { id: m2, uses: "action:make", needs: [m1], compensate: { uses: "action:undo2" } }
    - { id: verify, uses: "action:check", needs: [m2], with: { that: false, message: boom } }
"""


def test_a_failed_queued_run_is_compensated_once_through_the_queue(
    cli: Cli, start_cli: StartCli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    # `onFailure: automatic` after a failed terminal run, whichever command drove it: a
    # serve's drive too. The compensation run is queued work a serve claims and drives.
    query = _setup(tmp_path, ledger_target)
    (tmp_path / "wf.yaml").write_text(AUTO_COMPENSATED, encoding="utf-8")
    got = cli("--output", "json", "submit", "wf.yaml", "--db", "db.sqlite")
    assert got.rc == 0, got.stderr
    run_id = str(got.data["runId"])
    report = serve_report(start_cli(*SERVE))
    runs = cli("--output", "json", "runs", "list", "--db", "db.sqlite").data["runs"]
    assert [(r["mode"], r["state"]) for r in runs] == [
        ("compensation", "succeeded"),
        ("execute", "failed"),
    ]
    assert runs[0]["sourceRunId"] == run_id
    driven = [(r["runId"], r["state"]) for r in report["runs"]]
    assert driven == [(run_id, "failed"), (runs[0]["runId"], "succeeded")]
    marker = (tmp_path / "marker.txt").read_text(encoding="utf-8").split()
    assert marker == ["made", "made", "undo2", "undo1"]  # reverse order, each undone once
    effects = cli("--output", "json", "effects", "list", run_id, "--db", "db.sqlite").data
    assert [r["status"] for r in effects["reconciliations"]] == ["compensated"] * 2
    # Once: another serve finds nothing more to do, and nothing is compensated again.
    assert serve_report(start_cli(*SERVE))["runs"] == []
    assert len(query("SELECT run_id FROM runs", ())) == 2


def test_serve_refuses_once_together_with_exit_when_idle(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    _setup(tmp_path, ledger_target)
    cli("submit", "wf.yaml", "--db", "db.sqlite", "--input", "tag=n")
    got = cli("serve", "--db", "db.sqlite", "--once", "--exit-when-idle", *LEASE)
    assert got.rc == 2 and "mutually exclusive" in got.stderr, got.stderr
    assert not markers(tmp_path)
